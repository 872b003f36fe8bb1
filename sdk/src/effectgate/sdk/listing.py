"""The tools an agent may call, read page after page (``tg.tools.list.<principal>``).

The policy service answers the listing in pages (:mod:`effectgate.contracts.bus.paging`), each
fitting one NATS message; :func:`every_tool` reads them all.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec
import nats
from nats.aio.client import Client

from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.sdk.errors import RegistryNoAnswer, RegistryUnavailable, UnknownTool

__all__ = ["MAX_PAGES", "every_tool", "registry_reply"]

log = logging.getLogger("effectgate.sdk")

MAX_PAGES = 10_000
"""Most pages read for one listing (each holds up to 100 tools)."""


async def every_tool(
    page: Callable[[str | None], Awaitable[ToolsReply]], describe: Callable[[str], Awaitable[ToolDescriptor]]
) -> list[ToolDescriptor]:
    """Every tool of every page, in name order.

    Args:
        page: asks for the page after a cursor (``None``: the first).
        describe: looks one tool up whole.

    Raises:
        RegistryUnavailable: a page was refused or never came, or the listing did not end.
    """
    found: list[ToolDescriptor] = []
    after: str | None = None
    for _ in range(MAX_PAGES):
        reply = await page(after)
        whole = {d.name: d for d in reply.descriptors or []}
        for summary in reply.summaries or []:
            if (looked_up := await _whole(describe, summary.name, summary.size_bytes)) is not None:
                whole[summary.name] = looked_up
        found += [whole[name] for name in sorted(whole)]
        if (after := reply.next) is None:
            return found
    raise RegistryUnavailable(f"the tool listing did not end within {MAX_PAGES} pages")


async def _whole(
    describe: Callable[[str], Awaitable[ToolDescriptor]], name: str, size_bytes: int
) -> ToolDescriptor | None:
    try:
        return await describe(name)
    except RegistryUnavailable as error:
        log.warning("tool %s (%d bytes) is too large to list and could not be looked up: %s", name, size_bytes, error)
        return None


async def registry_reply(nc: Client, subject: str, body: bytes, timeout_s: float) -> ToolsReply:
    """The policy service's answer on ``subject`` (``tg.tools.list.<p>`` or ``tg.tools.get.<p>``), if ``ok``.

    Raises:
        RegistryNoAnswer: no answer within ``timeout_s`` seconds (nobody listening, or too late).
        UnknownTool: no such tool or version for this principal.
        RegistryUnavailable: any other refusal.
    """
    try:
        reply = await nc.request(subject, body, timeout=timeout_s)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
        raise RegistryNoAnswer(f"no answer on {subject}: {error!r}") from None
    listing = msgspec.json.decode(reply.data, type=ToolsReply)
    if not listing.ok:
        raise (UnknownTool if listing.reason_code == "unknown_tool" else RegistryUnavailable)(listing.reason)
    return listing
