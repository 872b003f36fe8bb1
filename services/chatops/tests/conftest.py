"""In-memory twins for the chat-ops workflow's unit tests (no chat, no bus), as fixtures."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from effectgate.chatops.answers import ChatAnswer
from effectgate.chatops.domain import Card
from effectgate.chatops.errors import ChatUnavailable
from effectgate.chatops.memory import MemoryCardStore
from effectgate.chatops.ports import AnswerSink
from effectgate.chatops.service import ChatOps
from effectgate.contracts.events import ApprovalRequested, BoundRequest, Related
from effectgate.shared.runtime.reporting import SecurityReporter

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def requested(request_id: str = "r1", arguments: dict[str, Any] | None = None, **fields: Any) -> ApprovalRequested:
    """An ApprovalRequested as the approvals service publishes it."""
    bound = BoundRequest(
        principal="agent-a",
        tool="files",
        version="1.0.0",
        descriptor_digest="sha256:" + "0" * 64,
        operation="write",
        arguments=arguments if arguments is not None else {"path": "notes.txt", "text": "hi"},
    )
    base: dict[str, Any] = {
        "event_id": f"requested:{request_id}",
        "occurred_at": NOW,
        "request_id": request_id,
        "principal": "agent-a",
        "approval_id": "ap-0123456789ab",
        "request_hash": "sha256:abcdef0123456789" + "0" * 48,
        "approver_role": "operator",
        "expires_at": NOW + timedelta(minutes=15),
        "request": bound,
        "idempotency_key": "key-1",
        "policy_id": "irreversible-write-approval",
        "approvers": ("alice", "bob"),
    }
    return ApprovalRequested(**{**base, **fields})


@dataclass
class FakeChat:
    """Records what the workflow asked chat to do; can be made unavailable."""

    platform: str = "matrix"
    down: bool = False
    lose_post_answer: bool = False
    posted: list[tuple[str, Card, str]] = field(default_factory=list)
    edits: list[tuple[str, str, Card]] = field(default_factory=list)
    thread: list[tuple[str, str, str, str]] = field(default_factory=list)
    replies: list[tuple[ChatAnswer, str]] = field(default_factory=list)

    def _check(self) -> None:
        if self.down:
            raise ChatUnavailable("chat is down", retry_after_s=3.0)

    async def post_card(self, room: str, card: Card, txn_id: str) -> str:
        self._check()
        self.posted.append((room, card, txn_id))
        if self.lose_post_answer:
            self.lose_post_answer = False
            raise ChatUnavailable("connection lost after the post")
        return f"$m{len(self.posted)}"

    async def find_card(self, room: str, approval_id: str) -> str | None:
        self._check()
        found = [i for i, (r, card, _) in enumerate(self.posted, 1) if (r, card.approval_id) == (room, approval_id)]
        return f"$m{found[0]}" if found else None

    async def edit_card(self, room: str, message_id: str, card: Card) -> None:
        self._check()
        self.edits.append((room, message_id, card))

    async def post_in_thread(self, room: str, message_id: str, text: str, txn_id: str) -> None:
        self._check()
        self.thread.append((room, message_id, text, txn_id))

    async def reply(self, answer: ChatAnswer, text: str) -> None:
        self._check()
        self.replies.append((answer, text))

    async def start(self, answers: AnswerSink) -> None:
        self.answers = answers

    async def stop(self) -> None:
        return None


@dataclass
class FakeApprovals:
    """The approvals service as the bot sees it."""

    decided: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reply: dict[str, Any] = field(default_factory=lambda: {"ok": True, "reason_code": "granted", "reason": "granted"})
    pending_list: list[Any] = field(default_factory=list)

    async def decide(self, approver: str, command: dict[str, Any]) -> dict[str, Any]:
        self.decided.append((approver, command))
        return self.reply

    async def pending(self) -> list[Any]:
        return self.pending_list


MAPPED = {("matrix", "@alice:example.org"): "alice", ("matrix", "@bob:example.org"): "bob"}


@pytest.fixture
def make_requested() -> Any:
    """Factory of ApprovalRequested events: ``make_requested(request_id, arguments, **fields)``."""
    return requested


@pytest.fixture
def related() -> type[Related]:
    """The Related struct (tests cannot import conftest)."""
    return Related


@pytest.fixture
def chat() -> FakeChat:
    """A chat that records every call."""
    return FakeChat()


@pytest.fixture
def approvals() -> FakeApprovals:
    """The approvals service as the bot sees it."""
    return FakeApprovals()


@pytest.fixture
def reports() -> list[Any]:
    """Security events the workflow reported."""
    return []


@pytest.fixture
def chatops(chat: FakeChat, approvals: FakeApprovals, reports: list[Any]) -> ChatOps:
    """The workflow over the fakes: role ``operator`` posts in ``!ops``; alice and bob are mapped on Matrix."""
    reporter = SecurityReporter("chatops")
    reporter.report = lambda kind, **fields: reports.append((kind, fields))  # type: ignore[method-assign]
    return ChatOps(
        chat=chat,
        cards=MemoryCardStore(),
        approvals=approvals,
        approver_of=lambda platform, user: MAPPED.get((platform, user)),
        rooms={"operator": "!ops"},
        fold_chars=40,
        part_chars=200,
        reporter=reporter,
    )


@pytest.fixture
def make_card() -> Callable[..., Card]:
    """A pending card for ``alice`` and ``bob``; keyword arguments replace fields (``args`` the arguments)."""

    def build(args: dict[str, Any] | None = None, **fields: Any) -> Card:
        card = Card(
            approval_id="ap-0123456789ab",
            request_ids=("req-1",),
            principal="agent-7",
            call="files@1.0.0.write_file",
            side_effect_class="irreversible_write",
            risk_tier="high",
            policy_id="writes-need-approval",
            approver_role="operator",
            approvers=("alice", "bob"),
            approvals_required=1,
            idempotency_key="key-1",
            request_hash12="0123456789ab",
            expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
            arguments=json.dumps(args if args is not None else {"path": "notes.txt"}, indent=2),
        )
        return msgspec.structs.replace(card, **fields)

    return build
