"""Chat platforms (Matrix, Slack), the cards bucket and the approvals client."""
