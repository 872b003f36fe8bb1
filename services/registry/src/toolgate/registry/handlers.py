"""The registry's broker edge: publish, get and list over request/reply."""

from __future__ import annotations

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from toolgate.contracts.catalog import Rpc, Subjects
from toolgate.contracts.events import decode_untrusted
from toolgate.registry.adapters.state_recorder import StateRecorder
from toolgate.registry.domain import GetQuery, RegistryReply
from toolgate.registry.errors import RegistryError
from toolgate.registry.service import Registry
from toolgate.shared.request_log import note
from toolgate.shared.service import RuntimeCell, rpc

__all__ = ["build_router"]

_query = msgspec.json.Decoder(GetQuery)


def _reply(reply: RegistryReply) -> bytes:
    """The reply's bytes; the reply is the request line (``result`` ok or refused, the tool it names)."""
    tool = reply.descriptor.name if reply.descriptor else None
    version = reply.descriptor.version if reply.descriptor else None
    result = "ok" if reply.ok else "refused"
    note("answered", result=result, reason_code=reply.reason_code, tool=tool, version=version)
    return msgspec.json.encode(reply)


def _refusal(error: RegistryError) -> bytes:
    return _reply(RegistryReply(ok=False, reason_code=error.reason_code, reason=error.reason))


def build_router(cell: RuntimeCell[Registry], states: RuntimeCell[StateRecorder] | None = None) -> NatsRouter:
    """Route the three registry requests, and the tool state announcements when ``states`` is given."""
    router = NatsRouter()
    if states is not None:

        @router.subscriber(Subjects.TOOL_STATES)
        async def on_state(msg: NatsMessage) -> None:
            await states().record(msg.raw_message.subject, msg.raw_message.data or b"")

    @rpc(router, Rpc.REGISTRY_PUBLISH, "registry")
    async def on_publish(msg: NatsMessage) -> bytes:
        try:
            return _reply(await cell().publish_request(msg.raw_message.data or b""))
        except RegistryError as error:
            return _refusal(error)

    @rpc(router, Rpc.REGISTRY_GET, "registry")
    async def on_get(msg: NatsMessage) -> bytes:
        try:
            query = decode_untrusted(_query, msg.raw_message.data or b"")
        except msgspec.DecodeError as error:
            return _refusal(RegistryError("malformed", f"not a lookup: {error}"))
        return _reply(await cell().get(query.tool, query.version))

    @rpc(router, Rpc.REGISTRY_LIST, "registry")
    async def on_list(msg: NatsMessage) -> bytes:
        return _reply(await cell().list())

    return router
