"""The policy pipeline for one raw tool request, from bytes to a decision.

Order (each step can end the request; later steps never run for an ended request):

1. size and decoding (refuse ``oversized`` / ``malformed``), and every value must have a
   canonical form (refuse ``unrepresentable_value``, naming its JSON Pointer: the request
   hash, the signatures and the audit chain could not process it),
2. identifiers (refuse ``invalid_request_id`` / ``invalid_idempotency_key`` /
   ``invalid_tool`` / ``invalid_version``),
3. a loaded policy and a known principal (deny ``no_policy`` / ``unknown_principal``),
   before any tool is looked up,
4. descriptor resolution (deny ``unknown_tool`` / ``unknown_operation``) and visibility:
   a tool or operation the Cedar policy does not let the principal call (directly or
   with an approval) is denied with exactly the code and text of a missing one, the
   policy's own reason kept in the decision's ``hidden_reason_code``/``hidden_reason``
   (:mod:`toolgate.policy.visibility`) — for a replay too: a stored result is returned
   only to a caller the current policy still lets make the call,
5. argument validation against the input schema (refuse ``schema_invalid``); a secret
   argument (``writeOnly``) must be a sealed envelope and an envelope must be a secret
   (refuse ``secret_not_sealed`` / ``sealed_unexpected``, naming the pointer, never the
   value; :mod:`toolgate.contracts.secret_arguments`),
6. the idempotency record of the key (other arguments under the same key: refuse
   ``idempotency_key_reused``); unless it is a replay, the tool's recorded state: a tool
   whose MCP server is unavailable, or degraded before its probe time, is denied
   ``tool_unavailable`` at once, naming why (:func:`toolgate.contracts.tool_states.blocks`;
   an unreadable state denies ``registry_unavailable``, fail closed); then Cedar's verdict
   (Cedar and the tool's state are read first, the record and the rate of step 7 are then
   asked in one store call, and the answers applied in this order: :mod:`toolgate.policy.screening`),
7. admission (:mod:`toolgate.policy.admission`): a call that executes now — Cedar's
   ``execute`` or a replay — consumes its rate budget, once per request id (deny
   ``rate_limited`` with ``retry_after_s``), and, unless it is a replay, reserves its
   cost in the spend budgets that apply (deny ``budget_exceeded`` with ``retry_after_s``,
   ``budget_cost_unknown``, ``budget_unavailable``); a call sent to approval consumes
   nothing until it is admitted at the re-check before its effect,
8. a completed key executes as ``idempotent_replay`` (no second approval); any other call
   gets Cedar's verdict.

The engine in force is read once per request; every decision names its version
(``policy_version``), the principal directory and attributes it was built over
(``entities_digest``) and, when the policy took part, what it said before replays and
admission (``policy_verdict``; ``deny`` for a hidden call): ``policy simulate`` compares that.

Every failure to check (store or limiter unreachable) denies: fail closed. An
idempotency index that lost its state (Redis restarted empty) is transient instead:
:class:`IndexLost` propagates, the message is retried while the executor rebuilds the
index from the stream, and the consumer's give-up denies it on the last delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toolgate.contracts.catalog import TOKEN
from toolgate.contracts.descriptors import ToolDescriptor, descriptor_digest, rate_of
from toolgate.contracts.events import BoundRequest, DecisionMade, ToolRequested, request_hash
from toolgate.contracts.schemas import SchemaUnusable, ensure_usable, first_error
from toolgate.contracts.secret_arguments import policy_schema, sealing_problem, secret_arguments
from toolgate.contracts.vocabulary import Verdict
from toolgate.policy.admission import Call, Spending, admit_rated, room_for
from toolgate.policy.engine import PolicyEngine, PolicyOutcome
from toolgate.policy.gate import AdmitAsk, ReplayGate, SequentialGate
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.intake import MAX_IDEMPOTENCY_KEY_CHARS, Ended, Envelope, parse_request
from toolgate.policy.outcomes import policy_verdict
from toolgate.policy.ports import DescriptorSource, LimitDecision, RateLimiter, ReplayIndex, ToolStates
from toolgate.policy.screening import blocked_now, screen
from toolgate.policy.visibility import absent_operation, hidden_from, unknown_tool

__all__ = ["MAX_IDEMPOTENCY_KEY_CHARS", "MAX_REASON_CHARS", "Envelope", "PolicyPorts", "decide", "fault_denial"]

MAX_REASON_CHARS = 2_000
"""Longest reason a decision carries, characters. A reason can quote what the agent sent (a schema
message repeating an argument's value): cut here, a decision stays the size of its request plus a
bound, so it always fits the message its request fitted in."""


@dataclass(frozen=True)
class PolicyPorts:
    """Everything :func:`decide` reaches outside itself.

    ``policy`` holds the engine in force; a decision reads it once (an atomic switch).
    ``spending``: the spend budgets and their ledger (``None``: no budgets).
    ``states``: the tools' recorded states (``None``: not consulted; the executor still refuses).
    ``gate``: the replay lookup and the rate admission in one call (``None``: ``replays``
    then ``limiter``, :class:`~toolgate.policy.gate.SequentialGate`).
    """

    policy: PolicyHolder
    descriptors: DescriptorSource
    limiter: RateLimiter
    replays: ReplayIndex
    clock: Callable[[], datetime]
    max_request_bytes: int
    spending: Spending | None = None
    states: ToolStates | None = None
    gate: ReplayGate | None = None


def _decision(env: Envelope, request_id: str, now: datetime, **fields: Any) -> DecisionMade:
    event_id = f"decision:{env.principal}:{request_id}"
    bounded = {name: _bounded(value) if name in _REASONS else value for name, value in fields.items()}
    return DecisionMade(event_id=event_id, occurred_at=now, request_id=request_id, principal=env.principal, **bounded)


_REASONS = frozenset({"reason", "hidden_reason"})


def _bounded(reason: Any) -> Any:
    """``reason`` within :data:`MAX_REASON_CHARS`, a cut one marked with its whole length."""
    if not isinstance(reason, str) or len(reason) <= MAX_REASON_CHARS:
        return reason
    return f"{reason[:MAX_REASON_CHARS]}… [reason cut at {MAX_REASON_CHARS} of {len(reason)} characters]"


def _engine_for(principal: str, engine: PolicyEngine | None) -> PolicyEngine:
    """The engine, before any tool is looked up: these answers say nothing about which tools exist."""
    if engine is None:
        raise Ended(Verdict.DENY, "no_policy", "no valid policy is loaded: default deny")
    if engine.directory.principal(principal) is None:
        raise Ended(Verdict.DENY, "unknown_principal", f"principal {principal!r} is not in the principal directory")
    return engine


async def _resolve(principal: str, request: ToolRequested, engine: PolicyEngine, ports: PolicyPorts) -> ToolDescriptor:
    try:
        descriptor = await ports.descriptors.get(request.tool, request.version)
    except Exception:  # any registry fault denies (fail closed)
        raise Ended(Verdict.DENY, "registry_unavailable", "the registry cannot be read: denied (fail closed)") from None
    if descriptor is None:
        raise Ended(Verdict.DENY, *unknown_tool(request.tool, request.version))
    if request.operation not in descriptor.operations:
        raise Ended(Verdict.DENY, *absent_operation(engine, principal, descriptor, request.operation, request.version))
    if hidden := hidden_from(engine, principal, descriptor, request.operation, request.version):
        raise Ended(Verdict.DENY, hidden.reason_code, hidden.reason, hidden.policy, policy_verdict=Verdict.DENY)
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
    return descriptor


def _governed(
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


def _ask(call: Call, governed: PolicyOutcome | Ended, blocked: Ended | None) -> AdmitAsk:
    """Admission with the replay lookup: a replay when the policy lets it run, a fresh call when it executes now."""
    bucket, rate = rate_of(call.descriptor, call.operation)
    runs = isinstance(governed, PolicyOutcome)
    fresh = runs and governed.verdict is Verdict.EXECUTE and blocked is None
    return AdmitAsk(bucket, rate, call.request_id, fresh=fresh, replay=runs)


async def _admit(call: Call, limit: LimitDecision | None, replay: bool, ports: PolicyPorts, said: Verdict) -> None:
    if limit is None:  # the store answered no admission where one was asked: fail closed
        raise Ended(Verdict.DENY, "rate_limiter_unavailable", "the rate limiter did not answer", policy_verdict=said)
    refused = await admit_rated(call, limit, None if replay else ports.spending)
    if refused is not None:
        retry = refused.retry_after_s
        raise Ended(Verdict.DENY, refused.reason_code, refused.reason, retry_after_s=retry, policy_verdict=said)


async def decide(env: Envelope, ports: PolicyPorts) -> DecisionMade:
    """Decide one raw request; never raises for anything the request contains.

    Returns:
        An unsigned :class:`DecisionMade` addressed to ``env.principal``.
    """
    now, engine = ports.clock(), ports.policy.engine  # read once: the whole decision under one policy
    made_under = _made_under(engine)
    try:
        request = parse_request(env, ports.max_request_bytes)
    except Ended as ended:
        return _ended(env, env.request_id, now, ended, None, made_under)
    try:
        return await _decide_parsed(env, request, ports, now, engine)
    except Ended as ended:
        return _ended(env, request.request_id, now, ended, request.idempotency_key, made_under)


def _made_under(engine: PolicyEngine | None) -> dict[str, str | None]:
    """The decision's ``policy_version`` and ``entities_digest``: what ``engine`` was built from (``None``: none)."""
    if engine is None:
        return {"policy_version": None, "entities_digest": None}
    return {"policy_version": engine.version, "entities_digest": engine.entities_digest}


def fault_denial(env: Envelope, now: datetime, reason_code: str, reason: str) -> DecisionMade:
    """A ``deny`` decision for a request the service could not decide (fail closed).

    Carries only the envelope's principal and request id, so it can always be signed.
    """
    return _decision(env, env.request_id, now, verdict=Verdict.DENY, reason_code=reason_code, reason=reason)


def _ended(
    env: Envelope, request_id: str, now: datetime, ended: Ended, key: str | None, made_under: dict[str, str | None]
) -> DecisionMade:
    return _decision(
        env,
        request_id,
        now,
        verdict=ended.verdict,
        reason_code=ended.reason_code,
        reason=ended.reason,
        idempotency_key=key,
        hidden_reason_code=ended.hidden.reason_code if ended.hidden else None,
        hidden_reason=ended.hidden.reason if ended.hidden else None,
        retry_after_s=ended.retry_after_s,
        policy_verdict=ended.policy_verdict,
        **made_under,
    )


async def _decide_parsed(
    env: Envelope, request: ToolRequested, ports: PolicyPorts, now: datetime, in_force: PolicyEngine | None
) -> DecisionMade:
    if not TOKEN.match(env.principal):
        raise Ended(Verdict.REFUSE, "invalid_principal", "principal must match [A-Za-z0-9_-]{1,64}")
    engine = _engine_for(env.principal, in_force)
    descriptor = await _resolve(env.principal, request, engine, ports)
    bound = BoundRequest(
        principal=env.principal,
        tool=descriptor.name,
        version=descriptor.version,
        descriptor_digest=descriptor_digest(descriptor),
        operation=request.operation,
        arguments=request.arguments,
    )
    digest = request_hash(bound)
    spec = descriptor.operations[request.operation]
    common: dict[str, Any] = {
        "idempotency_key": request.idempotency_key,
        "request": bound,
        "request_hash": digest,
        "side_effect_class": spec.side_effect_class,
        "risk_tier": spec.risk_tier,
        "timeout_s": descriptor.timeout_s,
        "version_pinned": request.version is not None,
        **_made_under(engine),
    }
    call = Call(env.principal, descriptor, request.operation, request.arguments, request.request_id, now)
    governed = _governed(env.principal, descriptor, request, engine)
    blocked = await blocked_now(descriptor.name, ports.states, now)
    said = policy_verdict(governed) if isinstance(governed, PolicyOutcome) else None
    gate = ports.gate or SequentialGate(ports.replays, ports.limiter)
    replay, limit = await screen(env.principal, request, digest, _ask(call, governed, blocked), gate, said)
    if not replay and blocked is not None:
        raise blocked
    if isinstance(governed, Ended):
        raise governed
    common["policy_verdict"] = said = policy_verdict(outcome := governed)
    if replay or outcome.verdict is Verdict.EXECUTE:
        await _admit(call, limit, replay, ports, said)
    elif (no_room := await room_for(call, ports.spending)) is not None:  # no approval asked in vain
        retry = no_room.retry_after_s
        raise Ended(Verdict.DENY, no_room.reason_code, no_room.reason, retry_after_s=retry, policy_verdict=said)
    if replay:
        return _decision(
            env,
            request.request_id,
            now,
            verdict=Verdict.EXECUTE,
            reason_code="idempotent_replay",
            reason=f"the idempotency key completed before: its receipt is replayed ({outcome.reason})",
            **common,
        )
    approval = outcome.verdict is Verdict.NEEDS_APPROVAL
    return _decision(
        env,
        request.request_id,
        now,
        verdict=outcome.verdict,
        reason_code=outcome.reason_code,
        reason=outcome.reason,
        approver_role=outcome.approver_role,
        policy_id=", ".join(outcome.policy_ids) if approval else None,
        approvals_required=outcome.approvals_required if approval else 1,
        **common,
    )
