"""Whether a permission is still good at the moment of effect (checked before a new run starts)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.errors import Problem
from effectgate.contracts.events import ApprovalGranted, DecisionMade
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery, valid_answer
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.effects.timing import Timing
from effectgate.executor.ports import Bus

__all__ = ["Permission", "RecheckUnavailable", "Stop"]

log = logging.getLogger("effectgate.executor")


class Stop(NamedTuple):
    """How a request ends without running."""

    outcome: Outcome
    reason_code: str
    reason: str
    retry_after_s: float | None = None


class RecheckUnavailable(Problem):
    """The policy service gave no valid answer: nothing may run yet (transient)."""


@dataclass
class Permission:
    """Checks that a decided (or granted) call may still run now."""

    bus: Bus
    policy_key: Ed25519PublicKey
    clock: Callable[[], datetime]
    timing: Timing

    async def check(self, decision: DecisionMade, grant: ApprovalGranted | None) -> Stop | None:
        """Return how the request ends without running, or ``None`` when it may run.

        Raises:
            RecheckUnavailable: the re-check got no valid answer.
        """
        if barred := self._barred(decision, grant):
            return barred
        if not self._needs_recheck(decision, grant):
            return None
        answer = await self._recheck(decision, grant)
        if answer.allowed:
            return None
        return Stop(Outcome.DENIED, answer.reason_code, f"not run: {answer.reason}", answer.retry_after_s)

    def _barred(self, decision: DecisionMade, grant: ApprovalGranted | None) -> Stop | None:
        now = self.clock()
        if decision.reason_code == "idempotent_replay":
            reason = "the key's stored receipt is gone (expired): nothing ran; retry with a new idempotency key"
            return Stop(Outcome.REFUSED, "replay_record_missing", reason)
        if grant is not None and grant.expires_at <= now:
            return Stop(Outcome.DENIED, "approval_expired", "the approval expired before use")
        if (now - decision.occurred_at).total_seconds() > self.timing.decision_max_age_s:
            reason = f"the decision is older than {self.timing.decision_max_age_s:g}s: nothing ran"
            return Stop(Outcome.DENIED, "decision_expired", reason)
        return None

    def _needs_recheck(self, decision: DecisionMade, grant: ApprovalGranted | None) -> bool:
        age_s = (self.clock() - decision.occurred_at).total_seconds()
        return grant is not None or age_s > self.timing.recheck_after_s

    async def _recheck(self, decision: DecisionMade, grant: ApprovalGranted | None) -> RecheckAnswer:
        assert decision.request is not None
        query = RecheckQuery(
            principal=decision.principal,
            request=decision.request,
            request_hash=decision.request_hash or "",
            version_pinned=decision.version_pinned,
            approver=grant.approver if grant else None,
            admit_request_id=decision.request_id if grant else None,
        )
        answer = await self.bus.recheck(query)
        if answer is None or not valid_answer(answer, query, self.policy_key, self.clock()):
            log.warning("no valid re-check answer for %s/%s", decision.principal, decision.request_id)
            raise RecheckUnavailable(decision.request_id)
        return answer
