"""The approvals service."""
