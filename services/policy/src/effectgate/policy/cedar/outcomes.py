"""What a Cedar answer means for a call: the outcome and the policies it names.

Pure: turns ``cedarpy`` answers into :class:`PolicyOutcome` values (the decision
algorithm is in :mod:`effectgate.policy.cedar.engine`'s docstring).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import cedarpy

from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.annotations import PolicyInfo, approvals_required
from effectgate.policy.cedar.schema import ACTION_APPROVAL

__all__ = ["Evaluation", "Outcomes", "PolicyOutcome", "deny", "evaluation", "ids_of", "policy_verdict", "readable"]

_POLICY_REF = re.compile(r"`(policy\d+)`")


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    """What the policy says about one tool request.

    Attributes:
        verdict: ``execute``, ``needs_approval`` or ``deny``.
        reason_code: ``permitted``, ``approval_required``, ``forbidden``, ``no_permit``,
            ``unknown_principal``, ``policy_error`` or ``policy_invalid``.
        reason: human-readable reason naming the policies involved.
        approver_role: role entitled to approve (``needs_approval`` only).
        policy_ids: ``@id`` of the determining policies, in file order.
        approvals_required: distinct entitled approvers needed (``needs_approval`` only).
    """

    verdict: Verdict
    reason_code: str
    reason: str
    approver_role: str | None = None
    policy_ids: tuple[str, ...] = ()
    approvals_required: int = 1


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One Cedar answer: allowed, determining policies (Cedar ids), evaluation errors."""

    allowed: bool
    determining: tuple[str, ...]
    errors: tuple[str, ...]


class Outcomes:
    """Builds outcomes from Cedar answers, naming policies by their ``@id``.

    Args:
        infos: Cedar's positional policy id to the policy's annotations and position.
    """

    def __init__(self, infos: Mapping[str, PolicyInfo]) -> None:
        self._infos = infos

    def permitted(self, evaluation: Evaluation) -> PolicyOutcome:
        """``execute`` / ``permitted``, naming the permitting policies."""
        ids = ids_of(self.known(evaluation.determining))
        return PolicyOutcome(Verdict.EXECUTE, "permitted", f"permitted by policy {', '.join(ids)}", None, ids)

    def needs_approval(self, evaluation: Evaluation) -> PolicyOutcome:
        """``needs_approval`` with the one approver role and the quorum; ``policy_invalid`` without a role."""
        infos = self.known(evaluation.determining)
        ids = ids_of(infos)
        if missing := [info.id for info in infos if not info.annotations.get("approver_role")]:
            reason = f"policy {', '.join(missing)} permits {ACTION_APPROVAL} without @approver_role"
            return deny("policy_invalid", reason, ids)
        roles = sorted({info.annotations["approver_role"] for info in infos})
        if len(roles) != 1:  # several roles, or no determining policy at all
            return deny("policy_invalid", f"policies {', '.join(ids)} name approver roles {roles}", ids)
        quorum = approvals_required(infos)
        by = f"{quorum} approvers with role {roles[0]!r}" if quorum > 1 else f"role {roles[0]!r}"
        reason = f"approval by {by} required by policy {', '.join(ids)}"
        return PolicyOutcome(Verdict.NEEDS_APPROVAL, "approval_required", reason, roles[0], ids, quorum)

    def denied(self, execute: Evaluation, approval: Evaluation, call: str) -> PolicyOutcome:
        """``forbidden`` (the first forbid's ``@reason``) or ``no_permit``."""
        determining = self.known((*execute.determining, *approval.determining))
        forbids = [info for info in determining if info.effect == "forbid"]
        if not forbids:
            return deny("no_permit", f"default deny: no policy permits {call}")
        reason = forbids[0].annotations.get("reason") or f"forbidden by policy {forbids[0].id}"
        return deny("forbidden", reason, ids_of(forbids))

    def errored(self, evaluation: Evaluation) -> PolicyOutcome:
        """``policy_error``, Cedar's message with policies named by ``@id``."""
        message = "; ".join(evaluation.errors)
        ids = ids_of(self.known(_POLICY_REF.findall(message)))
        return deny("policy_error", f"policy evaluation failed: {readable(message, self._infos)}", ids)

    def known(self, cedar_ids: Iterable[str]) -> list[PolicyInfo]:
        """The policies behind Cedar ids, once each, in file order."""
        unique = {c: self._infos[c] for c in cedar_ids if c in self._infos}
        return sorted(unique.values(), key=lambda info: info.position)


def ids_of(infos: Iterable[PolicyInfo]) -> tuple[str, ...]:
    """The ``@id`` of each policy."""
    return tuple(info.id for info in infos)


def readable(message: str, infos: Mapping[str, PolicyInfo]) -> str:
    """Replace Cedar's positional ids (`` `policy3` ``) in ``message`` with ``@id`` values."""
    return _POLICY_REF.sub(lambda m: f"`{infos[m[1]].id}`" if m[1] in infos else m[0], message)


def policy_verdict(outcome: PolicyOutcome) -> Verdict:
    """What the policy said, as a decision records it (``DecisionMade.policy_verdict``).

    ``refuse`` for an argument the policy could not be given (``argument_untypable``: the
    caller's value, not the policy's judgement), else the outcome's verdict.
    """
    return Verdict.REFUSE if outcome.reason_code == "argument_untypable" else outcome.verdict


def deny(reason_code: str, reason: str, policy_ids: tuple[str, ...] = ()) -> PolicyOutcome:
    """A ``deny`` outcome."""
    return PolicyOutcome(Verdict.DENY, reason_code, reason, None, policy_ids)


def evaluation(result: cedarpy.AuthzResult) -> Evaluation:
    """One Cedar answer as an :class:`Evaluation`."""
    diagnostics = result.diagnostics
    allowed = result.decision is cedarpy.Decision.Allow
    return Evaluation(allowed=allowed, determining=tuple(diagnostics.reasons), errors=tuple(diagnostics.errors))
