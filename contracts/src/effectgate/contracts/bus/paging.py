"""Listings in pages: every page of a listing fits one bus message, whatever its items weigh.

A listing request/reply (``tg.approvals.list``, ``tg.tools.list.<p>``, ``tg.registry.list``)
takes a :class:`PageQuery` (an empty body is the first page) and answers one page: items in a
fixed order, and ``next``, the cursor to ask for the page after it (``None`` on the last).
"""

from __future__ import annotations

from typing import Annotated, Final

import msgspec

from effectgate.contracts.events import decode_untrusted

__all__ = [
    "DEFAULT_PAGE_ITEMS",
    "MAX_CURSOR_CHARS",
    "MAX_PAGE_ITEMS",
    "MAX_QUERY_BYTES",
    "PageQuery",
    "page_query_of",
]

MAX_PAGE_ITEMS: Final = 1000
"""Most items one page holds, whatever ``limit`` asks."""

DEFAULT_PAGE_ITEMS: Final = 100
"""Items per page when the query names no ``limit``."""

MAX_CURSOR_CHARS: Final = 200
"""Longest cursor accepted, characters (a responder's cursors are shorter)."""

MAX_QUERY_BYTES: Final = 1024
"""Largest accepted query body, bytes."""


class PageQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of a paged listing.

    Attributes:
        after: the ``next`` of the page before (``None``: the first page).
        limit: most items on this page (1 to :data:`MAX_PAGE_ITEMS`).
        summary: leave large values out of each item (the listing names what it left out;
            each listing says which values: approvals leave out large arguments).
    """

    after: Annotated[str, msgspec.Meta(max_length=MAX_CURSOR_CHARS)] | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE_ITEMS)] = DEFAULT_PAGE_ITEMS
    summary: bool = False


_query = msgspec.json.Decoder(PageQuery)


def page_query_of(data: bytes) -> PageQuery | tuple[str, str]:
    """The query in ``data`` (an empty body: the first page), or ``(reason_code, reason)`` of its refusal.

    Refusals: ``oversized`` (more than :data:`MAX_QUERY_BYTES`), ``malformed`` (not a
    :class:`PageQuery`: unknown fields, a ``limit`` out of range, a cursor too long).
    """
    if len(data) > MAX_QUERY_BYTES:
        return "oversized", f"the query is {len(data)} bytes; the limit is {MAX_QUERY_BYTES}"
    if not data.strip():
        return PageQuery()
    try:
        return decode_untrusted(_query, data)
    except msgspec.DecodeError as error:
        return "malformed", f"not a page query {{after, limit, summary}}: {error}"
