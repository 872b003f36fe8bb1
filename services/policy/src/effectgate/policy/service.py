"""The policy pipeline for one tool request, from the request read to a decision."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.events import BoundRequest, DecisionMade, ToolRequested, request_hash
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor, descriptor_digest, rate_of
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.outcomes import policy_verdict
from effectgate.policy.domain import LimitDecision
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.pipeline.admission import Call, Spending, admit_rated, room_for
from effectgate.policy.pipeline.gate import SequentialGate
from effectgate.policy.pipeline.intake import MAX_IDEMPOTENCY_KEY_CHARS, Ended, Envelope, check_identifiers
from effectgate.policy.pipeline.resolution import engine_for, governed, resolve
from effectgate.policy.pipeline.screening import blocked_now, screen
from effectgate.policy.pipeline.verdicts import MAX_REASON_CHARS, decision, ended_decision, fault_denial, made_under
from effectgate.policy.ports import AdmitAsk, RateLimiter, ReplayGate, ReplayIndex, StoreRoom, ToolStates

__all__ = [
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "MAX_REASON_CHARS",
    "Envelope",
    "PolicyPorts",
    "decide_request",
    "decide_unread",
    "fault_denial",
]


@dataclass(frozen=True)
class PolicyPorts:
    """Everything :func:`decide_request` reaches outside itself.

    ``policy`` holds the engine in force; a decision reads it once (an atomic switch).
    ``max_request_bytes``: the largest request body the broker edge reads, bytes.
    ``spending``: the spend budgets and their ledger (``None``: no budgets).
    ``states``: the tools' recorded states (``None``: not consulted; the executor still refuses).
    ``gate``: the replay lookup and the rate admission in one call (``None``: ``replays``
    then ``limiter``, :class:`~effectgate.policy.pipeline.gate.SequentialGate`).
    ``room``: whether the record has room for a new request (``None``: not consulted).
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
    room: StoreRoom | None = None


def decide_unread(env: Envelope, ended: Ended, ports: PolicyPorts) -> DecisionMade:
    """The refusal of a request message that could not be read (``ended`` says why)."""
    return ended_decision(env, env.request_id, ports.clock(), ended, None, made_under(ports.policy.engine))


async def decide_request(env: Envelope, request: ToolRequested, ports: PolicyPorts) -> DecisionMade:
    """Decide one request read from ``env``; never raises for anything the request contains.

    Raises:
        IndexLost: the idempotency index lost its state (transient: the message is retried).

    Returns:
        An unsigned :class:`DecisionMade` addressed to ``env.principal``.
    """
    now, engine = ports.clock(), ports.policy.engine  # read once: the whole decision under one policy
    try:
        check_identifiers(request)
        await _room_for_new(env, ports)
    except Ended as ended:
        return ended_decision(env, env.request_id, now, ended, None, made_under(engine))
    try:
        return await _decide_checked(env, request, ports, now, engine)
    except Ended as ended:
        return ended_decision(env, request.request_id, now, ended, request.idempotency_key, made_under(engine))


async def _room_for_new(env: Envelope, ports: PolicyPorts) -> None:
    """Deny (``store_full``) a new request when the record is nearly full: its room is for the admitted ones.

    A redelivery is not new: it may have been admitted before, and its decision is owed.
    """
    if env.first_delivery and ports.room is not None and (full := await ports.room.full(len(env.data))):
        raise Ended(Verdict.DENY, "store_full", f"{full}; try again once an operator has made room")


def _ask(call: Call, outcome: PolicyOutcome | Ended, blocked: Ended | None) -> AdmitAsk:
    """Admission with the replay lookup: a replay when the policy lets it run, a fresh call when it executes now."""
    bucket, rate = rate_of(call.descriptor, call.operation)
    runs = isinstance(outcome, PolicyOutcome)
    fresh = runs and outcome.verdict is Verdict.EXECUTE and blocked is None
    return AdmitAsk(bucket, rate, call.request_id, fresh=fresh, replay=runs)


async def _admit(call: Call, limit: LimitDecision | None, replay: bool, ports: PolicyPorts, said: Verdict) -> None:
    if limit is None:  # the store answered no admission where one was asked: fail closed
        raise Ended(Verdict.DENY, "rate_limiter_unavailable", "the rate limiter did not answer", policy_verdict=said)
    refused = await admit_rated(call, limit, None if replay else ports.spending)
    if refused is not None:
        retry = refused.retry_after_s
        raise Ended(Verdict.DENY, refused.reason_code, refused.reason, retry_after_s=retry, policy_verdict=said)


def _bound(env: Envelope, request: ToolRequested, descriptor: ToolDescriptor) -> BoundRequest:
    """The request as decided: bound to the descriptor's version and digest."""
    return BoundRequest(
        principal=env.principal,
        tool=descriptor.name,
        version=descriptor.version,
        descriptor_digest=descriptor_digest(descriptor),
        operation=request.operation,
        arguments=request.arguments,
    )


def _common(
    request: ToolRequested, bound: BoundRequest, descriptor: ToolDescriptor, engine: PolicyEngine
) -> dict[str, Any]:
    """The fields every decision on a resolved call carries."""
    spec = descriptor.operations[request.operation]
    return {
        "idempotency_key": request.idempotency_key,
        "request": bound,
        "request_hash": request_hash(bound),
        "side_effect_class": spec.side_effect_class,
        "risk_tier": spec.risk_tier,
        "timeout_s": descriptor.timeout_s,
        "version_pinned": request.version is not None,
        **made_under(engine),
    }


async def _decide_checked(
    env: Envelope, request: ToolRequested, ports: PolicyPorts, now: datetime, in_force: PolicyEngine | None
) -> DecisionMade:
    if not TOKEN.match(env.principal):
        raise Ended(Verdict.REFUSE, "invalid_principal", "principal must match [A-Za-z0-9_-]{1,64}")
    engine = engine_for(env.principal, in_force)
    descriptor = await resolve(env.principal, request, engine, ports.descriptors)
    common = _common(request, _bound(env, request, descriptor), descriptor, engine)
    call = Call(env.principal, descriptor, request.operation, request.arguments, request.request_id, now)
    replay, limit, outcome = await _screened(call, request, common["request_hash"], engine, ports)
    common["policy_verdict"] = said = policy_verdict(outcome)
    if replay or outcome.verdict is Verdict.EXECUTE:
        await _admit(call, limit, replay, ports, said)
    elif (no_room := await room_for(call, ports.spending)) is not None:  # no approval asked in vain
        retry = no_room.retry_after_s
        raise Ended(Verdict.DENY, no_room.reason_code, no_room.reason, retry_after_s=retry, policy_verdict=said)
    return _made(env, request.request_id, now, replay, outcome, common)


async def _screened(
    call: Call, request: ToolRequested, digest: str, engine: PolicyEngine, ports: PolicyPorts
) -> tuple[bool, LimitDecision | None, PolicyOutcome]:
    """Cedar, the tool's state, then the key's record and the rate in one store call (step 6), in that order."""
    outcome = governed(call.principal, call.descriptor, request, engine)
    blocked = await blocked_now(call.descriptor.name, ports.states, call.at)
    said = policy_verdict(outcome) if isinstance(outcome, PolicyOutcome) else None
    gate = ports.gate or SequentialGate(ports.replays, ports.limiter)
    replay, limit = await screen(call.principal, request, digest, _ask(call, outcome, blocked), gate, said)
    if not replay and blocked is not None:
        raise blocked
    if isinstance(outcome, Ended):
        raise outcome
    return replay, limit, outcome


def _made(
    env: Envelope, request_id: str, now: datetime, replay: bool, outcome: PolicyOutcome, common: dict[str, Any]
) -> DecisionMade:
    """The decision on a call that may run: its replay, or the policy's verdict."""
    if replay:
        reason = f"the idempotency key completed before: its receipt is replayed ({outcome.reason})"
        return decision(
            env, request_id, now, verdict=Verdict.EXECUTE, reason_code="idempotent_replay", reason=reason, **common
        )
    approval = outcome.verdict is Verdict.NEEDS_APPROVAL
    return decision(
        env,
        request_id,
        now,
        verdict=outcome.verdict,
        reason_code=outcome.reason_code,
        reason=outcome.reason,
        approver_role=outcome.approver_role,
        policy_id=", ".join(outcome.policy_ids) if approval else None,
        approvals_required=outcome.approvals_required if approval else 1,
        **common,
    )
