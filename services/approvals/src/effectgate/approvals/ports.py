"""Ports of the approvals service (in-memory twins for unit tests: :mod:`effectgate.approvals.memory`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from effectgate.approvals.domain import ApprovalState, PendingApproval
from effectgate.contracts.events import ApprovalRequested, ApprovalVoted, DecisionMade
from effectgate.contracts.rpc.contents import ContentAnswer, ContentQuery
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery

__all__ = ["ApprovalStore", "ApprovalsBus", "ReceiptSeen", "VoteResult", "VoteStatus", "Waiting"]


class VoteStatus(StrEnum):
    """What a vote or a withdrawal did."""

    VOTED = "voted"
    """Recorded; the quorum is not met yet."""
    GRANTED = "granted"
    """Recorded, and it completed the quorum: the approval is granted (by this call)."""
    ALREADY_VOTED = "already_voted"
    """The approver had voted before: nothing changed."""
    WITHDRAWN = "withdrawn"
    """The approver's vote was removed."""
    NOT_VOTED = "not_voted"
    """A withdrawal by an approver without a vote: nothing changed."""
    NOT_PENDING = "not_pending"
    """The approval was answered or expired already (or does not exist): nothing changed."""


@dataclass(frozen=True)
class VoteResult:
    """The outcome of :meth:`ApprovalStore.vote` or :meth:`ApprovalStore.withdraw`.

    Attributes:
        status: what happened.
        state: the approval's state afterwards (``None``: no such approval).
        votes: approvers whose vote counts afterwards, in vote order.
    """

    status: VoteStatus
    state: ApprovalState | None
    votes: tuple[str, ...]


@dataclass(frozen=True)
class ReceiptSeen:
    """A request's receipt as an approval listing shows it.

    Attributes:
        receipt_id: the receipt's event id.
        outcome: its outcome, e.g. ``succeeded``.
    """

    receipt_id: str
    outcome: str


@dataclass(frozen=True)
class Waiting:
    """The requests that may still open an approval, as :meth:`ApprovalsBus.waiting` read them.

    Attributes:
        requests: ``(principal, request_id)`` of every request not decided yet and of every
            ``needs_approval`` decision whose approval is not opened yet (and some that were:
            those after the consumers' acknowledgement floors), in stream order.
        complete: every such request was read (``False``: more than the limit wait).
    """

    requests: tuple[tuple[str, str], ...]
    complete: bool


class ApprovalStore(Protocol):
    """Approvals; every transition out of ``pending`` happens at most once."""

    async def open(self, pending: PendingApproval, now: datetime) -> str:
        """Open ``pending``, or join the pending approval it duplicates; return the approval that answers it.

        A pending (unexpired at ``now``) approval of the same request hash and idempotency
        key is joined: the request is added to its ``joined``. Opening or joining again
        (a redelivered decision) answers the same approval id.
        """
        ...

    async def get(self, approval_id: str) -> PendingApproval | None:
        """Return the approval with its state, votes, joined requests and who answered it; or ``None``."""
        ...

    async def answering(self, own_id: str) -> str | None:
        """The approval that answers the request whose own approval id is ``own_id``.

        ``own_id`` (:func:`~effectgate.contracts.approval_ids.approval_id_for` of the request)
        when the request opened an approval, the approval it joined, or ``None`` when the
        store keeps neither (never opened, or its keys expired).
        """
        ...

    async def list_pending(self) -> list[PendingApproval]:
        """Return approvals still pending, soonest expiry first."""
        ...

    async def pending_index(self) -> list[tuple[float, str]]:
        """``(expiry as epoch seconds, approval id)`` of every pending approval, in that order (the listing's)."""
        ...

    async def same_request(self, request_hash: str) -> list[PendingApproval]:
        """Every approval opened for ``request_hash`` that the store still keeps, in any state."""
        ...

    async def vote(self, approval_id: str, approver: str, required: int, token: str) -> VoteResult:
        """Record ``approver``'s vote on a pending approval; grant it when ``required`` votes are in.

        The same call retried with the same ``token`` answers as it did the first time.
        """
        ...

    async def withdraw(self, approval_id: str, approver: str) -> VoteResult:
        """Remove ``approver``'s vote from a pending approval."""
        ...

    async def resolve(self, approval_id: str, state: ApprovalState, token: str, answerer: str | None = None) -> bool:
        """Atomically move ``pending`` to ``state``; ``False`` if it was not pending.

        Resolving again with the same ``token`` (a retried call) answers ``True`` again.
        ``answerer`` is kept as the approval's ``answered_by``.
        """
        ...

    async def due(self, now: datetime) -> list[str]:
        """Return ids of pending approvals whose expiry is at or before ``now``."""
        ...

    async def restore(self, pending: PendingApproval) -> None:
        """Re-open an approval rebuilt from the stream, with its ``votes`` (no epoch check, joins nothing)."""
        ...

    async def restore_join(self, approval_id: str, request_id: str, own_id: str) -> None:
        """Re-attach ``request_id`` (whose own approval id would be ``own_id``) to ``approval_id``."""
        ...

    async def has_epoch(self) -> bool:
        """Whether the store is complete (its epoch marker exists)."""
        ...

    async def set_epoch(self, epoch: str) -> None:
        """Mark the store complete."""
        ...

    async def lock_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Take the rebuild lock for ``ttl_s`` seconds; ``False`` when another owner holds it."""
        ...

    async def renew_rebuild(self, owner: str, ttl_s: float) -> bool:
        """Renew ``owner``'s rebuild lock; ``False`` when it no longer holds it (start over)."""
        ...

    async def finish_rebuild(self, owner: str, epoch: str) -> bool:
        """Mark the store complete if ``owner`` still holds the rebuild lock; ``False``: start over."""
        ...


class ApprovalsBus(Protocol):
    """The stream as the approvals service reads it, and the policy re-check."""

    async def has_receipt(self, principal: str, request_id: str) -> bool:
        """Whether the request already ended."""
        ...

    async def receipt(self, principal: str, request_id: str) -> ReceiptSeen | None:
        """The request's receipt (the first message on its receipt subject), or ``None``."""
        ...

    async def resolved(self, principal: str, request_id: str) -> bool:
        """Whether the request has a grant, a rejection or a receipt in the stream."""
        ...

    def requested(self) -> AsyncIterator[ApprovalRequested]:
        """Every approval-requested event, oldest first."""
        ...

    def voted(self, principal: str, request_id: str) -> AsyncIterator[ApprovalVoted]:
        """Every vote event on the request's subject, oldest first (signatures not verified)."""
        ...

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:
        """Ask the policy service whether the call may still run; ``None`` without an answer."""
        ...

    async def contents(self, query: ContentQuery) -> ContentAnswer | None:
        """Ask the executor what the call's file references name now; ``None`` without an answer."""
        ...

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:
        """The first message on the request's decision subject, when it is a decision (not verified)."""
        ...

    async def waiting(self, limit: int) -> Waiting:
        """The requests waiting for their decision or for their approval to open (at most ``limit`` of each).

        Read after the acknowledgement floors of the policy's request consumer and of this
        service's decision consumer: a request before both floors was decided, and its
        approval (if it needed one) opened, before this call.

        Raises:
            ApprovalStoreUnavailable: the stream cannot be read.
        """
        ...
