"""``tg.tools.list.<principal>`` and ``tg.tools.get.<principal>``: the tools a caller may call.

The principal is the subject's last token (:func:`principal_of`); the body is a page query
(:mod:`effectgate.contracts.bus.paging`; empty: the first page) or a lookup
(:class:`~effectgate.contracts.rpc.listing.ToolsQuery`). The answers are
:mod:`effectgate.policy.in_force.tool_listing`'s.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from faststream.nats import NatsMessage, NatsRouter

from effectgate.contracts.bus.catalog import Rpc, token_of
from effectgate.contracts.bus.paging import page_query_of
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.listing import ToolsQuery, ToolsReply
from effectgate.policy.handlers.decisions import PolicyRuntime
from effectgate.policy.in_force.tool_listing import get_tool, list_for
from effectgate.policy.service import PolicyPorts
from effectgate.shared.runtime.assembly import max_payload_of, rpc

__all__ = ["get_for", "list_page", "principal_of", "route_listings"]

_query = msgspec.json.Decoder(ToolsQuery)


def principal_of(subject: str) -> str:
    """The principal of ``tg.tools.{list,get}.<principal>``; ``""`` (nobody) for a foreign subject."""
    return token_of(Rpc.TOOLS_LIST, subject) or token_of(Rpc.TOOLS_GET, subject) or ""


async def list_page(principal: str, body: bytes, ports: PolicyPorts, max_payload: int) -> ToolsReply:
    """Answer one ``tg.tools.list.<principal>`` body (a page query; empty: the first page); never raises.

    A body that is no page query answers ``malformed`` (or ``oversized``), naming why.
    """
    query = page_query_of(body)
    if isinstance(query, tuple):
        return ToolsReply(ok=False, reason_code=query[0], reason=query[1])
    return await list_for(principal, ports, query, max_payload)


async def get_for(principal: str, body: bytes, ports: PolicyPorts) -> ToolsReply:
    """Answer one ``tg.tools.get.<principal>`` body (``{"tool": …, "version": … | null}``); never raises.

    A body that is not a lookup answers ``malformed``; the rest is :func:`get_tool`'s.
    """
    try:
        query = decode_untrusted(_query, body)
    except msgspec.DecodeError as error:
        return ToolsReply(ok=False, reason_code="malformed", reason=f"not a lookup: {error}")
    return await get_tool(principal, query, ports)


def route_listings(router: NatsRouter, runtime: Callable[[], PolicyRuntime]) -> None:
    """Answer ``tg.tools.list.<p>`` / ``tg.tools.get.<p>`` on ``router``: a :class:`ToolsReply` for ``<p>``."""

    @rpc(router, Rpc.TOOLS_LIST, "policy")
    async def on_list(msg: NatsMessage) -> bytes:
        principal, body = principal_of(msg.raw_message.subject), msg.raw_message.data or b""
        return msgspec.json.encode(await list_page(principal, body, runtime().ports, max_payload_of(msg)))

    @rpc(router, Rpc.TOOLS_GET, "policy")
    async def on_get(msg: NatsMessage) -> bytes:
        principal, body = principal_of(msg.raw_message.subject), msg.raw_message.data or b""
        return msgspec.json.encode(await get_for(principal, body, runtime().ports))
