"""Errors of the chat-ops bot."""

from __future__ import annotations

from effectgate.contracts.errors import Problem

__all__ = ["ChatOpsError", "ChatRefused", "ChatUnavailable", "RequestRefused"]


class ChatOpsError(Problem):
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


class RequestRefused(ChatOpsError):
    """A request to the Slack endpoint turned away before Bolt dispatches it.

    Attributes:
        reason: what was wrong, one line naming no content of the request.
        status: the HTTP answer (200 for a replay: there is nothing to retry).
        reason_code: the security event's reason code, e.g. ``slack_request_malformed``.
        answer: the response text.
        digest: ``sha256:<hex>`` of the whole body; ``None`` when it was not read to its end.
    """

    def __init__(self, status: int, reason_code: str, reason: str, answer: str, digest: str | None) -> None:
        super().__init__(reason)
        self.status, self.reason_code, self.answer, self.digest = status, reason_code, answer, digest
