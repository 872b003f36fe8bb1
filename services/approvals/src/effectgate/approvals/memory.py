"""In-memory twins of the approvals service's ports, for unit tests.

They follow the Redis store's rules (:mod:`effectgate.approvals.adapters.redis_store`): one
transition out of ``pending``, distinct votes, joins only into a pending, unexpired approval
with the same request hash and idempotency key, and :class:`IndexLost` without the epoch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.domain import ApprovalState, PendingApproval
from effectgate.approvals.errors import store_lost
from effectgate.approvals.ports import ReceiptSeen, VoteResult, VoteStatus, Waiting
from effectgate.contracts.events import ApprovalRequested, ApprovalVoted, DecisionMade
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.contents import ContentAnswer, ContentQuery
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.tools.contents import ContentState
from effectgate.shared.stores.rebuilding import MemoryEpoch

__all__ = ["InMemoryApprovalStore", "InMemoryApprovalsBus"]


@dataclass
class _Record:
    pending: PendingApproval
    votes: dict[str, str] = field(default_factory=dict)  # approver -> token, in vote order
    joined: list[str] = field(default_factory=list)
    token: str | None = None
    answerer: str | None = None


class InMemoryApprovalStore(MemoryEpoch):
    """:class:`~effectgate.approvals.ports.ApprovalStore` in dicts."""

    def __init__(self) -> None:
        super().__init__()
        self._items: dict[str, _Record] = {}
        self._joined_to: dict[str, str] = {}

    async def open(self, pending: PendingApproval, now: datetime) -> str:  # noqa: D102
        self._check()
        if pending.approval_id in self._items:
            return pending.approval_id
        if (joined := self._joined_to.get(pending.approval_id)) is not None:
            return joined
        for record in self._items.values():
            if _joinable(record.pending, pending, now):
                record.joined.append(pending.request_id)
                self._joined_to[pending.approval_id] = record.pending.approval_id
                return record.pending.approval_id
        self._items[pending.approval_id] = _Record(msgspec.structs.replace(pending, state=ApprovalState.PENDING))
        return pending.approval_id

    async def get(self, approval_id: str) -> PendingApproval | None:  # noqa: D102
        self._check()
        record = self._items.get(approval_id)
        return None if record is None else _read(record)

    async def answering(self, own_id: str) -> str | None:  # noqa: D102
        self._check()
        return own_id if own_id in self._items else self._joined_to.get(own_id)

    async def list_pending(self) -> list[PendingApproval]:  # noqa: D102
        self._check()
        pending = [_read(r) for r in self._items.values() if r.pending.state is ApprovalState.PENDING]
        return sorted(pending, key=lambda p: p.expires_at)

    async def pending_index(self) -> list[tuple[float, str]]:  # noqa: D102
        self._check()
        pending = [r.pending for r in self._items.values() if r.pending.state is ApprovalState.PENDING]
        return sorted((p.expires_at.timestamp(), p.approval_id) for p in pending)

    async def same_request(self, request_hash: str) -> list[PendingApproval]:  # noqa: D102
        self._check()
        return [_read(r) for r in self._items.values() if r.pending.request_hash == request_hash]

    async def vote(self, approval_id: str, approver: str, required: int, token: str) -> VoteResult:  # noqa: D102
        self._check()
        record = self._items.get(approval_id)
        if record is None:
            return VoteResult(VoteStatus.NOT_PENDING, None, ())
        if record.pending.state is not ApprovalState.PENDING:  # granted by this very call, retried: the same answer
            again = record.pending.state is ApprovalState.GRANTED and record.token == token
            return _result(VoteStatus.GRANTED if again else VoteStatus.NOT_PENDING, record)
        if approver in record.votes:
            return _result(VoteStatus.VOTED if record.votes[approver] == token else VoteStatus.ALREADY_VOTED, record)
        record.votes[approver] = token
        if len(record.votes) < required:
            return _result(VoteStatus.VOTED, record)
        self._set(record, ApprovalState.GRANTED, token, approver)
        return _result(VoteStatus.GRANTED, record)

    async def withdraw(self, approval_id: str, approver: str) -> VoteResult:  # noqa: D102
        self._check()
        record = self._items.get(approval_id)
        if record is None or record.pending.state is not ApprovalState.PENDING:
            return _result(VoteStatus.NOT_PENDING, record)
        if record.votes.pop(approver, None) is None:
            return _result(VoteStatus.NOT_VOTED, record)
        return _result(VoteStatus.WITHDRAWN, record)

    async def resolve(  # noqa: D102
        self, approval_id: str, state: ApprovalState, token: str, answerer: str | None = None
    ) -> bool:
        self._check()
        record = self._items.get(approval_id)
        if record is not None and record.pending.state is state and record.token == token:
            return True
        if record is None or record.pending.state is not ApprovalState.PENDING:
            return False
        self._set(record, state, token, answerer)
        return True

    async def due(self, now: datetime) -> list[str]:  # noqa: D102
        return [p.approval_id for p in await self.list_pending() if p.expires_at <= now]

    async def restore(self, pending: PendingApproval) -> None:  # noqa: D102
        if pending.approval_id not in self._items:
            record = _Record(msgspec.structs.replace(pending, votes=(), joined=()))
            record.votes = dict.fromkeys(pending.votes, "restored")
            self._items[pending.approval_id] = record

    async def restore_join(self, approval_id: str, request_id: str, own_id: str) -> None:  # noqa: D102
        if own_id in self._joined_to:
            return
        self._joined_to[own_id] = approval_id
        if (record := self._items.get(approval_id)) is not None:
            record.joined.append(request_id)

    def lose_everything(self) -> None:
        """Forget every approval and the epoch, as a Redis restarted empty would."""
        self._items.clear()
        self._joined_to.clear()
        self.forget_epoch()

    def _set(self, record: _Record, state: ApprovalState, token: str, answerer: str | None) -> None:
        record.pending = msgspec.structs.replace(record.pending, state=state)
        record.token, record.answerer = token, answerer

    def _check(self) -> None:
        if self.epoch is None:
            raise store_lost()


def _joinable(existing: PendingApproval, new: PendingApproval, now: datetime) -> bool:
    return (
        existing.state is ApprovalState.PENDING
        and existing.expires_at > now
        and existing.request_hash == new.request_hash
        and existing.idempotency_key is not None
        and existing.idempotency_key == new.idempotency_key
    )


def _read(record: _Record) -> PendingApproval:
    return msgspec.structs.replace(
        record.pending, votes=tuple(record.votes), joined=tuple(record.joined), answered_by=record.answerer
    )


def _result(status: VoteStatus, record: _Record | None) -> VoteResult:
    if record is None:
        return VoteResult(status, None, ())
    return VoteResult(status, record.pending.state, tuple(record.votes))


@dataclass
class InMemoryApprovalsBus:
    """:class:`~effectgate.approvals.ports.ApprovalsBus` over lists; ``answer`` decides re-checks.

    Attributes:
        receipts: request ids that have a receipt.
        receipt_seen: what :meth:`receipt` answers per request id (default ``succeeded``).
        outcomes: request ids with a grant or rejection in the stream.
        requests: the approval-requested events of the stream.
        votes: the vote events of the stream.
        answer: answers a re-check; ``None``: the policy does not answer.
        read: what the executor reads of a call's file references (default: it names none);
            ``None`` from it: the executor does not answer.
        executor: the key the executor's answers are signed with.
        clock: when the executor says it read the files (UTC).
        decisions: the first message of each request's decision subject, by ``(principal, request_id)``.
        undecided: ``(principal, request_id)`` of the requests that wait (:meth:`waiting`).
        more_waiting: more requests wait than :meth:`waiting` was asked for.
    """

    receipts: set[str] = field(default_factory=set)
    receipt_seen: dict[str, ReceiptSeen] = field(default_factory=dict)
    outcomes: set[str] = field(default_factory=set)
    requests: list[ApprovalRequested] = field(default_factory=list)
    votes: list[ApprovalVoted] = field(default_factory=list)
    answer: Callable[[RecheckQuery], RecheckAnswer | None] | None = None
    read: Callable[[ContentQuery], tuple[ContentState, ...] | None] = field(default=lambda query: ())
    executor: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    decisions: dict[tuple[str, str], DecisionMade] = field(default_factory=dict)
    undecided: list[tuple[str, str]] = field(default_factory=list)
    more_waiting: bool = False

    async def has_receipt(self, principal: str, request_id: str) -> bool:  # noqa: D102
        return request_id in self.receipts

    async def receipt(self, principal: str, request_id: str) -> ReceiptSeen | None:  # noqa: D102
        if request_id not in self.receipts:
            return None
        return self.receipt_seen.get(request_id, ReceiptSeen(f"receipt-{request_id}", "succeeded"))

    async def resolved(self, principal: str, request_id: str) -> bool:  # noqa: D102
        return request_id in self.receipts or request_id in self.outcomes

    async def requested(self) -> AsyncIterator[ApprovalRequested]:  # noqa: D102
        for event in list(self.requests):
            yield event

    async def voted(self, principal: str, request_id: str) -> AsyncIterator[ApprovalVoted]:  # noqa: D102
        for event in list(self.votes):
            if (event.principal, event.request_id) == (principal, request_id):
                yield event

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:  # noqa: D102
        return self.answer(query) if self.answer else None

    async def contents(self, query: ContentQuery) -> ContentAnswer | None:  # noqa: D102
        found = self.read(query)
        if found is None:
            return None
        answer = ContentAnswer(
            ok=True,
            reason_code="read",
            reason="read",
            request_hash=query.request_hash,
            contents=found,
            checked_at=self.clock(),
        )
        return sign_event(answer, self.executor)

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:  # noqa: D102
        return self.decisions.get((principal, request_id))

    async def waiting(self, limit: int) -> Waiting:  # noqa: D102
        return Waiting(requests=tuple(self.undecided[:limit]), complete=not self.more_waiting)
