"""The chat-ops bot: approval cards in Matrix rooms and Slack channels, answers back to the approvals service."""
