"""What a principal may see: the tools and operations the current policy lets it call.

An operation is *visible* to a principal when Cedar answers ``execute`` or
``needs_approval`` for it. toolgate's Cedar context is built from the descriptor alone
(tool, version, operation, side-effect class, risk tier; never the arguments), so that
answer is exactly what any request of that principal for that operation would get: the
listing and the call cannot disagree. A tool is visible when at least one of its
operations is.

Anything else — ``no_permit``, ``forbidden``, an evaluation error, an unknown principal —
hides it, and a hidden tool or operation is answered with the very code and text of one
that does not exist (:func:`unknown_tool`, :func:`unknown_operation`), on the listing and
on a call alike. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from toolgate.policy.engine import PolicyEngine, PolicyOutcome
from toolgate.shared.descriptors import OperationSpec, ToolDescriptor
from toolgate.shared.vocabulary import Verdict

__all__ = ["Hidden", "allows", "hidden_from", "unknown_operation", "unknown_tool", "visible", "visible_operations"]


@dataclass(frozen=True, slots=True)
class Hidden:
    """A call answered as if its target did not exist.

    Attributes:
        reason_code: what the caller is told (``unknown_tool`` / ``unknown_operation``).
        reason: the text a missing tool or operation gets, word for word.
        policy: what the policy actually said (kept in the decision for the audit).
    """

    reason_code: str
    reason: str
    policy: PolicyOutcome


def unknown_tool(tool: str, version: str | None) -> tuple[str, str]:
    """``(reason_code, reason)`` of a tool that does not exist at ``version`` (``None``: latest)."""
    return "unknown_tool", f"no tool {tool!r} at version {version or 'latest'}"


def unknown_operation(tool: str, operation: str) -> tuple[str, str]:
    """``(reason_code, reason)`` of an operation ``tool`` does not have."""
    return "unknown_operation", f"{tool} has no operation {operation!r}"


def allows(outcome: PolicyOutcome) -> bool:
    """Whether ``outcome`` lets the call happen (directly or after an approval)."""
    return outcome.verdict in (Verdict.EXECUTE, Verdict.NEEDS_APPROVAL)


def _outcomes(engine: PolicyEngine, principal: str, descriptor: ToolDescriptor) -> dict[str, PolicyOutcome]:
    name, version = descriptor.name, descriptor.version
    return {op: engine.decide(principal, name, version, op, spec) for op, spec in descriptor.operations.items()}


def visible_operations(engine: PolicyEngine, principal: str, descriptor: ToolDescriptor) -> dict[str, OperationSpec]:
    """The operations of ``descriptor`` that ``principal`` may call, in descriptor order."""
    outcomes = _outcomes(engine, principal, descriptor)
    return {op: spec for op, spec in descriptor.operations.items() if allows(outcomes[op])}


def visible(engine: PolicyEngine, principal: str, descriptor: ToolDescriptor) -> ToolDescriptor | None:
    """``descriptor`` as ``principal`` sees it: its callable operations only; ``None`` when none is."""
    operations = visible_operations(engine, principal, descriptor)
    return msgspec.structs.replace(descriptor, operations=operations) if operations else None


def hidden_from(
    engine: PolicyEngine, principal: str, descriptor: ToolDescriptor, operation: str, asked_version: str | None
) -> Hidden | None:
    """How a call of ``operation`` is answered when the policy hides it; ``None`` when it is visible.

    Args:
        engine: the current policy.
        principal: the caller (the subject token).
        descriptor: the resolved descriptor; ``operation`` must be one of its operations.
        operation: the operation called.
        asked_version: the version the request named (``None``: latest), for the text.
    """
    called = engine.decide(principal, descriptor.name, descriptor.version, operation, descriptor.operations[operation])
    if allows(called):
        return None  # the common case: one decision, the other operations are not looked at
    if any(allows(outcome) for outcome in _outcomes(engine, principal, descriptor).values()):
        return Hidden(*unknown_operation(descriptor.name, operation), called)
    return Hidden(*unknown_tool(descriptor.name, asked_version), called)
