"""What a principal may see: the tools and operations the current policy lets it call.

An operation is *visible* to a principal when some arguments could make Cedar answer
``execute`` or ``needs_approval`` for it (:meth:`PolicyEngine.may_allow`: partial evaluation
with the argument-derived context unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome

__all__ = [
    "Hidden",
    "absent_operation",
    "allows",
    "hidden_from",
    "unknown_operation",
    "unknown_tool",
    "visible",
    "visible_operations",
]


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


def visible_operations(engine: PolicyEngine, principal: str, descriptor: ToolDescriptor) -> dict[str, OperationSpec]:
    """The operations of ``descriptor`` that ``principal`` may call, in descriptor order."""
    return {op: spec for op, spec in descriptor.operations.items() if engine.may_allow(principal, descriptor, op)}


def visible(engine: PolicyEngine, principal: str, descriptor: ToolDescriptor) -> ToolDescriptor | None:
    """``descriptor`` as ``principal`` sees it: its callable operations only; ``None`` when none is."""
    operations = visible_operations(engine, principal, descriptor)
    return msgspec.structs.replace(descriptor, operations=operations) if operations else None


def absent_operation(
    engine: PolicyEngine, principal: str, descriptor: ToolDescriptor, operation: str, asked_version: str | None
) -> tuple[str, str]:
    """``(reason_code, reason)`` for an operation ``descriptor`` does not have.

    ``unknown_operation`` only when the principal may see the tool; for a tool hidden from
    it, the answer of a tool that does not exist, so a made-up operation name does not
    tell a hidden tool from a missing one.
    """
    if any(engine.may_allow(principal, descriptor, op) for op in descriptor.operations):
        return unknown_operation(descriptor.name, operation)
    return unknown_tool(descriptor.name, asked_version)


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
    if engine.may_allow(principal, descriptor, operation):
        return None  # the common case: the other operations are not looked at
    called = engine.decide(principal, descriptor, operation, {})  # what the policy says, for the audit
    if any(engine.may_allow(principal, descriptor, op) for op in descriptor.operations):
        return Hidden(*unknown_operation(descriptor.name, operation), called)
    return Hidden(*unknown_tool(descriptor.name, asked_version), called)
