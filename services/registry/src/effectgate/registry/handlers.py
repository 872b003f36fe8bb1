"""The registry's broker edge: publish, get and list over request/reply.

Every request is answered: a refusal the registry raises is answered with its reason code,
and so is any other fault (``not_ready`` while starting, ``bucket_unavailable`` when the
tools bucket cannot be reached, ``internal_error`` otherwise, logged with its traceback),
and an answer larger than the bus carries (``reply_too_large``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec
import nats.errors
from faststream.nats import NatsMessage, NatsRouter

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.registry import GetQuery, RegistryReply
from effectgate.registry.errors import RegistryError
from effectgate.registry.ports import ToolStates
from effectgate.registry.service import Registry
from effectgate.shared.consumer.request_log import note
from effectgate.shared.runtime.assembly import RuntimeCell, rpc

__all__ = ["build_router"]

log = logging.getLogger("effectgate.registry")

_query = msgspec.json.Decoder(GetQuery)

Work = Callable[[Registry], Awaitable[RegistryReply]]


def _reply(reply: RegistryReply) -> bytes:
    """The reply's bytes; the reply is the request line (``result`` ok or refused, the tool it names)."""
    tool = reply.descriptor.name if reply.descriptor else None
    version = reply.descriptor.version if reply.descriptor else None
    result = "ok" if reply.ok else "refused"
    note("answered", result=result, reason_code=reply.reason_code, tool=tool, version=version)
    return msgspec.json.encode(reply)


def _refusal(error: RegistryError) -> bytes:
    return _reply(RegistryReply(ok=False, reason_code=error.reason_code, reason=error.reason))


def _fault(method: str, error: Exception) -> RegistryError:
    """The refusal answering a fault that is not the request's."""
    if isinstance(error, nats.errors.Error):
        log.error("%s: the tools bucket could not be reached: %s", method, type(error).__name__)
        return RegistryError("bucket_unavailable", f"the tools bucket could not be reached ({type(error).__name__})")
    log.error("%s: failed", method, exc_info=error)
    return RegistryError("internal_error", f"the registry failed on this request ({type(error).__name__})")


def _fitting(body: bytes, limit_bytes: int) -> bytes:
    """``body``, or a ``reply_too_large`` refusal when it is larger than the bus carries."""
    if len(body) <= limit_bytes:
        return body
    reason = f"the answer is {len(body)} bytes; the bus carries at most {limit_bytes}: ask for each tool by name"
    return _refusal(RegistryError("reply_too_large", reason))


async def _answer(cell: RuntimeCell[Registry], method: str, work: Work) -> bytes:
    """The answer of ``work`` on the registry; a refusal or a fault is answered too, never silence."""
    try:
        registry = cell()
    except RuntimeError:
        return _refusal(RegistryError("not_ready", "the registry is starting: ask again shortly"))
    try:
        return _fitting(_reply(await work(registry)), registry.bucket.max_payload)
    except RegistryError as error:
        return _refusal(error)
    except Exception as error:  # never silence: the requester would only see a timeout
        return _refusal(_fault(method, error))


async def _get(registry: Registry, data: bytes) -> RegistryReply:
    """Answer one ``tg.registry.get``.

    Raises:
        RegistryError: ``malformed`` (not a lookup), or as :meth:`Registry.get`.
    """
    try:
        query = decode_untrusted(_query, data)
    except msgspec.DecodeError as error:
        raise RegistryError("malformed", f"not a lookup: {error}") from None
    return await registry.get(query.tool, query.version)


def build_router(cell: RuntimeCell[Registry], states: RuntimeCell[ToolStates] | None = None) -> NatsRouter:
    """Route the three registry requests, and the tool state announcements when ``states`` is given."""
    router = NatsRouter()
    if states is not None:

        @router.subscriber(Subjects.TOOL_STATES)
        async def on_state(msg: NatsMessage) -> None:
            await states().record(msg.raw_message.subject, msg.raw_message.data or b"")

    @rpc(router, Rpc.REGISTRY_PUBLISH, "registry")
    async def on_publish(msg: NatsMessage) -> bytes:
        data = msg.raw_message.data or b""
        return await _answer(cell, Rpc.REGISTRY_PUBLISH, lambda registry: registry.publish_request(data))

    @rpc(router, Rpc.REGISTRY_GET, "registry")
    async def on_get(msg: NatsMessage) -> bytes:
        data = msg.raw_message.data or b""
        return await _answer(cell, Rpc.REGISTRY_GET, lambda registry: _get(registry, data))

    @rpc(router, Rpc.REGISTRY_LIST, "registry")
    async def on_list(msg: NatsMessage) -> bytes:
        return await _answer(cell, Rpc.REGISTRY_LIST, lambda registry: registry.list())

    return router
