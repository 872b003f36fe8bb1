"""The tools an agent may call, read page after page (``tg.tools.list.<principal>``).

The policy service answers the listing in pages (:mod:`toolgate.contracts.paging`), each
fitting one NATS message; :func:`every_tool` reads them all. A tool the service listed only
as a summary (its descriptor alone does not fit a page) is looked up whole with
``tg.tools.get.<principal>``, which has a little more room; one that does not fit that either
is left out of the list with a warning naming it and its size.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.contracts.listing import ToolsReply
from toolgate.sdk.errors import RegistryUnavailable

__all__ = ["MAX_PAGES", "every_tool"]

log = logging.getLogger("toolgate.sdk")

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
