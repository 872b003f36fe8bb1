"""Steps 3 to 5 of the pipeline (:mod:`effectgate.policy.service`): the engine, the tool, its arguments, Cedar."""

from __future__ import annotations

from effectgate.contracts.events import ToolRequested
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor
from effectgate.contracts.tools.schemas import SchemaUnusable, ensure_usable, first_error
from effectgate.contracts.tools.secret_arguments import policy_schema, sealing_problem, secret_arguments
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.outcomes import policy_verdict
from effectgate.policy.in_force.visibility import absent_operation, hidden_from, unknown_tool
from effectgate.policy.pipeline.intake import Ended

__all__ = ["engine_for", "governed", "resolve"]


def engine_for(principal: str, engine: PolicyEngine | None) -> PolicyEngine:
    """The engine, before any tool is looked up: these answers say nothing about which tools exist."""
    if engine is None:
        raise Ended(Verdict.DENY, "no_policy", "no valid policy is loaded: default deny")
    if engine.directory.principal(principal) is None:
        raise Ended(Verdict.DENY, "unknown_principal", f"principal {principal!r} is not in the principal directory")
    return engine


async def resolve(
    principal: str, request: ToolRequested, engine: PolicyEngine, descriptors: DescriptorSource
) -> ToolDescriptor:
    """The descriptor ``request`` names, visible to ``principal``, its arguments valid for the operation."""
    descriptor = await _found(request, descriptors)
    if request.operation not in descriptor.operations:
        raise Ended(Verdict.DENY, *absent_operation(engine, principal, descriptor, request.operation, request.version))
    if hidden := hidden_from(engine, principal, descriptor, request.operation, request.version):
        raise Ended(Verdict.DENY, hidden.reason_code, hidden.reason, hidden.policy, policy_verdict=Verdict.DENY)
    _check_arguments(descriptor, request)
    return descriptor


async def _found(request: ToolRequested, descriptors: DescriptorSource) -> ToolDescriptor:
    try:
        descriptor = await descriptors.get(request.tool, request.version)
    except Exception:  # any registry fault denies (fail closed)
        raise Ended(Verdict.DENY, "registry_unavailable", "the registry cannot be read: denied (fail closed)") from None
    if descriptor is None:
        raise Ended(Verdict.DENY, *unknown_tool(request.tool, request.version))
    return descriptor


def _check_arguments(descriptor: ToolDescriptor, request: ToolRequested) -> None:
    spec = descriptor.operations[request.operation]
    try:  # a stored schema that cannot be compiled (nothing is ever fetched) denies: fail closed
        ensure_usable(spec.output_schema)
        secrets = secret_arguments(spec.input_schema)
        if sealed := sealing_problem(secrets, request.arguments):
            raise Ended(Verdict.REFUSE, sealed[0], f"arguments refused at {sealed[1]}")
        problem = first_error(policy_schema(spec.input_schema), request.arguments)
    except SchemaUnusable as error:
        reason = f"{request.tool}.{request.operation}: {error}: denied (fail closed)"
        raise Ended(Verdict.DENY, "schema_unusable", reason) from None
    if problem:
        raise Ended(Verdict.REFUSE, "schema_invalid", f"arguments invalid at {problem}")


def governed(
    principal: str, descriptor: ToolDescriptor, request: ToolRequested, engine: PolicyEngine
) -> PolicyOutcome | Ended:
    """The policy's outcome when it lets the call run (directly or with approval), else the refusal or denial."""
    outcome = engine.decide(principal, descriptor, request.operation, request.arguments)
    said = policy_verdict(outcome)
    if said is Verdict.REFUSE:  # the caller's value, not the policy's verdict
        return Ended(Verdict.REFUSE, outcome.reason_code, outcome.reason, policy_verdict=said)
    if outcome.verdict not in (Verdict.EXECUTE, Verdict.NEEDS_APPROVAL):
        return Ended(Verdict.DENY, outcome.reason_code, outcome.reason, policy_verdict=said)
    return outcome
