"""The operator's edge: readiness, policy publication and the spend budgets' counters."""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from effectgate.contracts.bus.catalog import TOKEN, Rpc
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.listing import Readiness
from effectgate.contracts.rpc.policy import PublishReply, PublishRequest
from effectgate.contracts.security import SecurityKind
from effectgate.policy.budgets.reconciliation import MAX_PAGE, CountersQuery, CountersReply, ResolveQuery, ResolveReply
from effectgate.policy.budgets.settlement import resolve
from effectgate.policy.errors import BudgetUnavailable
from effectgate.policy.handlers.decisions import PolicyRuntime
from effectgate.policy.handlers.settlement import BudgetRuntime
from effectgate.policy.in_force.publishing import refused
from effectgate.shared.runtime.assembly import rpc

__all__ = ["policy_text", "route_budgets", "route_operator"]

log = logging.getLogger("effectgate.policy")

_request = msgspec.json.Decoder(PublishRequest)
_counters_query = msgspec.json.Decoder(CountersQuery)
_resolve_query = msgspec.json.Decoder(ResolveQuery)
_STARTING = Readiness(ready=False, reason="the policy service is starting")


def policy_text(data: bytes, max_bytes: int) -> str | PublishReply:
    """The text of a ``tg.policy.publish`` body, or the refusal naming what is wrong with it."""
    if len(data) > max_bytes + 64:  # the JSON around the text, generously
        return refused(f"request is {len(data)} bytes; a policy may have at most {max_bytes}")
    try:
        text = decode_untrusted(_request, data).text
    except msgspec.DecodeError as error:
        return refused(f'request is not {{"text": <policy text>}}: {error}')
    if "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return refused("the policy text holds a NUL character or an unpaired surrogate")
    if len(text.encode("utf-8")) > max_bytes:
        return refused(f"the policy text is over {max_bytes} bytes")
    return text


def route_operator(router: NatsRouter, runtime: Callable[[], PolicyRuntime]) -> None:
    """Answer ``tg.policy.ready`` and ``tg.policy.publish`` on ``router``."""

    @rpc(router, Rpc.POLICY_READY, "policy")
    async def on_ready(msg: NatsMessage) -> bytes:
        try:
            rt = runtime()
        except RuntimeError:  # not built yet
            return msgspec.json.encode(_STARTING)
        return msgspec.json.encode(msgspec.structs.replace(rt.ports.policy.readiness(), replica=rt.replica))

    @rpc(router, Rpc.POLICY_PUBLISH, "policy")
    async def on_publish(msg: NatsMessage) -> bytes:
        try:
            rt = runtime()
        except RuntimeError:  # not built yet
            return msgspec.json.encode(refused("the policy service is starting: nothing changed"))
        return msgspec.json.encode(await _published(rt, msg.raw_message.data or b""))


async def _published(rt: PolicyRuntime, data: bytes) -> PublishReply:
    text = policy_text(data, rt.max_policy_bytes)
    reply = text if isinstance(text, PublishReply) else await rt.publisher.publish(text, "cli")
    if not reply.ok and rt.reporter is not None:  # audited; only the operator's NATS user may ask
        rt.reporter.report(SecurityKind.POLICY_REFUSED, reason_code="policy_refused", detail=reply.reason, payload=data)
    return reply


def route_budgets(router: NatsRouter, runtime: Callable[[], BudgetRuntime]) -> None:
    """Answer ``tg.policy.budgets`` and ``tg.policy.budgets.resolve`` on ``router``."""

    @rpc(router, Rpc.POLICY_BUDGETS, "policy")
    async def on_counters(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await _counters(runtime, msg.raw_message.data or b""))

    @rpc(router, Rpc.POLICY_BUDGETS_RESOLVE, "policy")
    async def on_resolve(msg: NatsMessage) -> bytes:
        return msgspec.json.encode(await _resolve(runtime, msg.raw_message.data or b""))


async def _counters(runtime: Callable[[], BudgetRuntime], body: bytes) -> CountersReply:
    try:
        query = decode_untrusted(_counters_query, body)
        counters, cursor = await runtime().spending.ledger.counters(query.cursor, min(max(query.count, 1), MAX_PAGE))
    except msgspec.DecodeError as error:
        return CountersReply(ok=False, reason=f"not a counters query: {error}")
    except (BudgetUnavailable, RuntimeError) as error:
        return CountersReply(ok=False, reason=getattr(error, "reason", None) or "the policy service is starting")
    return CountersReply(ok=True, counters=counters, cursor=cursor)


async def _resolve(runtime: Callable[[], BudgetRuntime], body: bytes) -> ResolveReply:
    try:
        query = decode_untrusted(_resolve_query, body)
    except msgspec.DecodeError as error:
        return ResolveReply(ok=False, reason=f"not a resolve query: {error}")
    if not (TOKEN.match(query.principal) and TOKEN.match(query.request_id)):
        return ResolveReply(ok=False, reason=f"principal and request_id must match {TOKEN.pattern}")
    return await _resolved(runtime, query)


async def _resolved(runtime: Callable[[], BudgetRuntime], query: ResolveQuery) -> ResolveReply:
    """The operator's resolution of one uncertain reservation, logged."""
    try:
        answer = await resolve(runtime().spending.ledger, query.principal, query.request_id, query.ran)
    except (BudgetUnavailable, RuntimeError) as error:
        return ResolveReply(ok=False, reason=getattr(error, "reason", None) or "the policy service is starting")
    log.warning(
        "budget resolution by the operator: %s/%s ran=%s: %s",
        query.principal,
        query.request_id,
        query.ran,
        answer.reason,
    )
    return answer
