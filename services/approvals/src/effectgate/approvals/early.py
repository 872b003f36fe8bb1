"""Answers to an approval that is not open yet: told to answer again, never reported as an attack.

An approval id is derived from its request
(:func:`~effectgate.contracts.approval_ids.approval_id_for`), so a voter may name it before the
approval exists: its request still waits for the policy's decision, or it needs approval and
this service has not opened it yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.approvals.domain import check_voter
from effectgate.approvals.errors import DecideRefused
from effectgate.approvals.ports import ApprovalsBus
from effectgate.contracts.approval_ids import APPROVAL_ID, approval_id_for
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import DecisionMade
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.vocabulary import Verdict

__all__ = ["MAX_WAITING", "EarlyAnswers", "NotOpen"]

MAX_WAITING = 1000
"""Most waiting requests read per consumer for one answer; beyond it the answer is ``approval_not_open``."""


@dataclass(frozen=True)
class NotOpen:
    """An approval that is not open yet, and why.

    Attributes:
        reason: human text (ends with what to do: answer again).
        principal: the requesting principal, when the request was found.
        request_id: the request, when found.
    """

    reason: str
    principal: str | None = None
    request_id: str | None = None


@dataclass
class EarlyAnswers:
    """Tells an approval not open yet from one nothing will open.

    Attributes:
        bus: the stream (waiting requests, decisions, receipts).
        directory: approvers and their roles, the agents' operators.
        policy_key: a decision counts only when signed by it.
    """

    bus: ApprovalsBus
    directory: PrincipalDirectory
    policy_key: Ed25519PublicKey

    async def classify(self, approver: str, approval_id: str) -> NotOpen | DecideRefused | None:
        """What an answer by ``approver`` to ``approval_id``, which the store does not hold, meets.

        Returns:
            :class:`NotOpen` (answer again); a :class:`DecideRefused` when ``approver`` could
            never answer it (report it); ``None`` when nothing in the stream will open it.

        Raises:
            ApprovalsError: the stream cannot be read.
        """
        if not APPROVAL_ID.match(approval_id):
            return None
        waiting = await self.bus.waiting(MAX_WAITING)
        found = next((r for r in waiting.requests if approval_id_for(*r) == approval_id), None)
        if found is not None:
            return await self.opening(approver, approval_id, *found)
        if waiting.complete:
            return None
        return _checked(approver, self.directory, NotOpen(f"{approval_id} is not open yet; answer again in a moment"))

    async def waiting_on(self, principal: str, request_id: str) -> NotOpen | None:
        """Whether ``principal``'s own ``request_id`` will still open an approval (the requester asks).

        ``None``: no such request waits (or it needs none, or it ended).

        Raises:
            ApprovalsError: the stream cannot be read.
        """
        waiting = await self.bus.waiting(MAX_WAITING)
        if (principal, request_id) not in waiting.requests and waiting.complete:
            return None
        found = await self.opening(None, approval_id_for(principal, request_id), principal, request_id)
        return found if isinstance(found, NotOpen) else None

    async def opening(
        self, approver: str | None, approval_id: str, principal: str, request_id: str
    ) -> NotOpen | DecideRefused | None:
        """Whether ``principal``'s ``request_id``, found waiting, will still open ``approval_id``.

        ``approver`` is checked as far as possible (``None``: the requester asks, nothing to check).
        """
        decision = await self._decision(principal, request_id)
        if decision is not None and decision.verdict is not Verdict.NEEDS_APPROVAL:
            return None
        if await self.bus.has_receipt(principal, request_id):
            return None
        stage = "its request waits for its decision" if decision is None else "it opens in a moment"
        not_open = NotOpen(f"{approval_id} is not open yet: {stage}; answer again", principal, request_id)
        if approver is None:
            return not_open
        role = (decision.approver_role or "") if decision is not None else None
        return _checked(approver, self.directory, not_open, principal, role)

    async def _decision(self, principal: str, request_id: str) -> DecisionMade | None:
        """The request's decision when it is the policy's and about it; else ``None`` (not decided, as far as known)."""
        decision = await self.bus.decision(principal, request_id)
        if decision is None or (decision.principal, decision.request_id) != (principal, request_id):
            return None
        return decision if verify_event(decision, self.policy_key) else None


def _checked(
    approver: str,
    directory: PrincipalDirectory,
    not_open: NotOpen,
    principal: str | None = None,
    role: str | None = None,
) -> NotOpen | DecideRefused:
    try:
        check_voter(approver, principal, role, directory)
    except DecideRefused as refused:
        return refused
    return not_open
