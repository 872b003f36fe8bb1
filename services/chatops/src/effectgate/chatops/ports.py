"""What the chat-ops workflow needs from the outside, as Protocols (their twins: :mod:`effectgate.chatops.memory`).

- :class:`ChatPort`: one chat platform (Matrix or Slack), rendering cards its own way;
- :class:`CardStore`: the bot's record of each card (room and message ids);
- :class:`ApprovalsPort`: the approvals service (answers and the pending list).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from effectgate.chatops.answers import ChatAnswer
from effectgate.chatops.domain import Card, CardRecord
from effectgate.contracts.rpc.approvals import PendingApproval

__all__ = ["AnswerSink", "ApprovalsPort", "CardStore", "ChatPort"]

AnswerSink = Callable[[ChatAnswer], Awaitable[None]]
"""Where an adapter hands every approver answer it receives."""


class ChatPort(Protocol):
    """One chat platform.

    Every method raises :class:`~effectgate.chatops.errors.ChatUnavailable` when chat cannot be
    reached or rate-limits (tried again later) and :class:`~effectgate.chatops.errors.ChatRefused`
    when it refuses the message for good.
    """

    platform: str

    async def post_card(self, room: str, card: Card, txn_id: str) -> str:
        """Post ``card`` in ``room``; return its message id.

        ``txn_id`` is fixed per card: a platform that deduplicates by it (Matrix) posts
        the card once however often this is retried.
        """
        ...

    async def find_card(self, room: str, approval_id: str) -> str | None:
        """The message id of this approval's card if it is already in ``room`` (a post whose answer was lost)."""
        ...

    async def edit_card(self, room: str, message_id: str, card: Card) -> None:
        """Replace the card's content with ``card`` (its state after an answer)."""
        ...

    async def post_in_thread(self, room: str, message_id: str, text: str, txn_id: str) -> None:
        """Post ``text`` (shown inertly, as preformatted text) in the card's thread."""
        ...

    async def reply(self, answer: ChatAnswer, text: str) -> None:
        """Answer an approver where they answered (the card's thread, or the command's channel)."""
        ...

    async def start(self, answers: AnswerSink) -> None:
        """Start receiving answers (sync loop, HTTP endpoint or socket) and hand each to ``answers``."""
        ...

    async def stop(self) -> None:
        """Stop receiving answers and close connections."""
        ...


class CardStore(Protocol):
    """The bot's cards, keyed by approval id; a request id or a message id finds its card too."""

    async def get(self, approval_id: str) -> CardRecord | None:
        """The record of the card of ``approval_id``, or ``None``."""
        ...

    async def put(self, record: CardRecord) -> None:
        """Store ``record`` and index its request ids and message id."""
        ...

    async def approval_of_request(self, request_id: str) -> str | None:
        """The approval whose card covers ``request_id``, or ``None``."""
        ...

    async def approval_of_message(self, room: str, message_id: str) -> str | None:
        """The approval whose card is the message ``message_id`` in ``room``, or ``None``."""
        ...


class ApprovalsPort(Protocol):
    """The approvals service, asked as the approver a chat user maps to."""

    async def decide(self, approver: str, command: dict[str, Any]) -> dict[str, Any]:
        """Send one answer on ``tg.approvals.decide.<approver>``; return the service's reply.

        Raises:
            ChatOpsError subclasses never; ``TimeoutError`` / ``OSError`` when the service
            does not answer (the approver is told to try again).
        """
        ...

    async def pending(self) -> list[PendingApproval]:
        """Every approval pending now, as the approvals service lists it (``tg.approvals.list``).

        Raises:
            TimeoutError / OSError: the approvals service does not answer, or answers a refusal.
        """
        ...
