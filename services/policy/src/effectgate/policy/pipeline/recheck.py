"""Re-checking one bound call against the current policy, directory and registry."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import msgspec

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.events import request_hash
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.pipeline.admission import Call, admit
from effectgate.policy.service import PolicyPorts

__all__ = ["recheck"]


class _Changed(Exception):
    def __init__(self, reason_code: str, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason_code, self.reason, self.retry_after_s = reason_code, reason, retry_after_s


async def recheck(query: RecheckQuery, ports: PolicyPorts, clock: Callable[[], datetime]) -> RecheckAnswer:
    """Answer whether ``query``'s call may still run now (unsigned; the handler signs it).

    The answer vouches for ``query.request_hash``, so that hash must be the hash of the
    request that is checked, and the principal checked is the bound request's own.

    Never raises: a check that cannot run answers ``allowed=False`` (fail closed), and a
    query holding a value without a canonical form (RFC 8785) is answered
    ``unrepresentable_value``, naming its JSON Pointer, before anything hashes it.
    """
    if problem := unrepresentable(msgspec.to_builtins(query)):
        return _answer(query, clock, False, "unrepresentable_value", f"query value at {problem}")
    if query.admit_request_id is not None and not TOKEN.match(query.admit_request_id):
        return _answer(query, clock, False, "invalid_request_id", "admit_request_id must match [A-Za-z0-9_-]{1,64}")
    if query.principal != query.request.principal or request_hash(query.request) != query.request_hash:
        return _answer(query, clock, False, "hash_mismatch", "the query's request does not hash to its request hash")
    try:
        descriptor = await _current_descriptor(query, ports)
        reason = _still_permitted(query, descriptor, ports)
        await _admitted(query, descriptor, ports, clock)
    except _Changed as changed:
        return _answer(query, clock, False, changed.reason_code, changed.reason, changed.retry_after_s)
    return _answer(query, clock, True, "still_allowed", reason)


def _answer(
    query: RecheckQuery, clock: Callable[[], datetime], ok: bool, code: str, reason: str, retry: float | None = None
) -> RecheckAnswer:
    return RecheckAnswer(
        request_hash=query.request_hash,
        allowed=ok,
        reason_code=code,
        reason=reason,
        checked_at=clock(),
        admitted_request_id=query.admit_request_id,
        retry_after_s=retry,
    )


async def _admitted(
    query: RecheckQuery, descriptor: ToolDescriptor, ports: PolicyPorts, clock: Callable[[], datetime]
) -> None:
    if query.admit_request_id is None:
        return
    bound = query.request
    call = Call(query.principal, descriptor, bound.operation, bound.arguments, query.admit_request_id, clock())
    refused = await admit(call, ports.limiter, ports.spending)
    if refused is not None:
        raise _Changed(refused.reason_code, f"not admitted now: {refused.reason}", refused.retry_after_s)


async def _current_descriptor(query: RecheckQuery, ports: PolicyPorts) -> ToolDescriptor:
    bound = query.request
    try:
        descriptor = await ports.descriptors.get(bound.tool, bound.version)
        latest = descriptor if query.version_pinned else await ports.descriptors.get(bound.tool, None)
    except Exception:  # any registry fault: not allowed (fail closed)
        raise _Changed("registry_unavailable", "the registry cannot be read to re-check the call") from None
    if descriptor is None or descriptor_digest(descriptor) != bound.descriptor_digest:
        raise _Changed("descriptor_changed", f"{bound.tool}@{bound.version} is no longer the descriptor decided on")
    if latest is None or latest.version != bound.version:
        newer = latest.version if latest else "none"
        reason = f"{bound.tool}@{bound.version} was superseded by {newer} and the request did not pin its version"
        raise _Changed("descriptor_superseded", reason)
    return descriptor


def _still_permitted(query: RecheckQuery, descriptor: ToolDescriptor, ports: PolicyPorts) -> str:
    bound = query.request
    engine = ports.policy.engine
    if engine is None:
        raise _Changed("no_policy", "no valid policy is loaded now")
    if bound.operation not in descriptor.operations:
        raise _Changed("descriptor_changed", f"{bound.tool}@{bound.version} has no operation {bound.operation!r}")
    outcome = engine.decide(query.principal, descriptor, bound.operation, bound.arguments)
    if outcome.verdict is Verdict.EXECUTE:
        return f"the current policy permits it ({outcome.reason})"
    if outcome.verdict is not Verdict.NEEDS_APPROVAL:
        raise _Changed(outcome.reason_code, f"the current policy no longer allows it: {outcome.reason}")
    return _approval_still_enough(query, outcome.approver_role or "", engine)


def _approval_still_enough(query: RecheckQuery, role: str, engine: PolicyEngine) -> str:
    approver = query.approver
    if approver is None:
        raise _Changed("approval_required", f"the current policy requires an approval by role {role!r}")
    if approver not in engine.directory.entitled(role, query.principal):  # not it, nor its operator
        raise _Changed("approver_not_entitled", f"{approver!r} may no longer approve it (role {role!r} required now)")
    return f"the current policy permits it with an approval by role {role!r}"
