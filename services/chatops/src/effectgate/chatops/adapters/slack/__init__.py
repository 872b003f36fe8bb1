"""Slack: the platform, Block Kit cards, the endpoint's signature checks, answers through Bolt."""
