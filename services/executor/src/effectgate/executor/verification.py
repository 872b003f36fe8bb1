"""Whether a decision or an approval event is genuine; the ones that are not are reported.

A call runs only on a policy-signed ``execute`` decision, or on an approvals-signed grant
that refers to the request's policy-signed ``needs_approval`` decision (guarantee 6,
docs/architecture.md). What is not genuine is named as a security event
(:mod:`effectgate.executor.forgery`) and runs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.security import SecurityKind
from effectgate.contracts.vocabulary import Verdict
from effectgate.executor.forgery import report_event
from effectgate.executor.ports import Outlet
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["Keys", "Verifier"]


@dataclass(frozen=True)
class Keys:
    """The public keys the executor verifies: decisions and re-checks (policy), approvals."""

    policy: Ed25519PublicKey
    approvals: Ed25519PublicKey


@dataclass(frozen=True)
class Verifier:
    """Checks signatures with ``keys``, reads a grant's decision from ``bus``, reports to ``reporter``."""

    keys: Keys
    bus: Outlet
    reporter: SecurityReporter

    def decision(self, decision: DecisionMade) -> bool:
        """Whether ``decision`` is signed by the policy key; one that is not is reported ``decision_forged``."""
        if not verify_event(decision, self.keys.policy):
            subject = Subjects.decision(decision.principal, decision.request_id)
            report_event(self.reporter, SecurityKind.DECISION_FORGED, decision, subject, "not signed by the policy key")
            return False
        return True

    async def approved_decision(self, event: ApprovalGranted | ApprovalRejected) -> DecisionMade | None:
        """The signed ``needs_approval`` decision a signed approval event refers to, else ``None``."""
        if not verify_event(event, self.keys.approvals):
            return self.forged_approval(event, "not signed by the approvals key")
        decision = await self.bus.decision(event.principal, event.request_id)
        if decision is None or not verify_event(decision, self.keys.policy):
            self._unverified(event, decision)
            return None
        if decision.verdict is not Verdict.NEEDS_APPROVAL:
            return self.forged_approval(event, f"the request's decision is {decision.verdict}, not needs_approval")
        return decision

    def forged_approval(self, event: ApprovalGranted | ApprovalRejected, detail: str) -> DecisionMade | None:
        """Report ``event`` as ``approval_forged``; ``None`` (no decision to act on)."""
        kind = "granted" if isinstance(event, ApprovalGranted) else "rejected"
        subject = Subjects.approval(kind, event.principal, event.request_id)
        report_event(self.reporter, SecurityKind.APPROVAL_FORGED, event, subject, detail)
        return None

    def _unverified(self, event: ApprovalGranted | ApprovalRejected, decision: DecisionMade | None) -> None:
        """Report an approval event whose request has no decision, or a first decision that does not verify."""
        if decision is None:
            self.forged_approval(event, "the request has no decision")
            return
        subject = Subjects.decision(decision.principal, decision.request_id)
        detail = "the first decision of the request is not signed by the policy key"
        report_event(self.reporter, SecurityKind.DECISION_FORGED, decision, subject, detail)
