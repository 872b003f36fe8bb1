"""Errors of the chat-ops bot.

Hierarchy::

    ChatOpsError
    ├── ChatUnavailable   chat cannot be reached or rate-limits us: try again later
    └── ChatRefused       chat refused this message for good (no such room, no rights)
"""

from __future__ import annotations

__all__ = ["ChatOpsError", "ChatRefused", "ChatUnavailable"]


class ChatOpsError(Exception):
    """Base of the chat-ops errors.

    Attributes:
        reason: what went wrong, for people.
        retry_after_s: when chat said how long to wait, seconds; else ``None``.
    """

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


class ChatUnavailable(ChatOpsError):
    """Chat is down, slow or rate-limiting: the message is tried again with back-off."""


class ChatRefused(ChatOpsError):
    """Chat refused the message for good (unknown room, missing rights, invalid content)."""
