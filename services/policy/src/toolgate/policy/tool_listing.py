"""Answers of ``tg.tools.list.<principal>`` and ``tg.tools.get.<principal>``: the tools a caller may call.

The principal is the subject's last token (the transport's word; NATS permissions let
agent ``<p>`` ask only as ``<p>``). Each tool is shown with the operations the current
policy lets that principal call (:mod:`toolgate.policy.visibility`); a tool it may not
call at all is absent from the listing, and looking it up gets the reply of a tool that
does not exist, code and text alike. The listing is paged (:mod:`toolgate.contracts.paging`):
each page fits the connection's ``max_payload``, its cursor is the last tool's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import msgspec

from toolgate.contracts.catalog import TOKEN
from toolgate.contracts.descriptors import SEMVER, TOOL_NAME, ToolDescriptor
from toolgate.contracts.events import decode_untrusted
from toolgate.contracts.listing import ToolsQuery, ToolsReply, ToolSummary
from toolgate.contracts.paging import MAX_CURSOR_CHARS, PageQuery, page_query_of
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.visibility import unknown_tool, visible
from toolgate.shared.paging import PageFiller, items_budget

__all__ = ["get_for", "list_for", "list_page", "principal_of"]

_query = msgspec.json.Decoder(ToolsQuery)
_UNREADABLE = ToolsReply(ok=False, reason_code="registry_unavailable", reason="the registry cannot be read")
_summary = msgspec.json.Decoder(ToolSummary)
_ENVELOPE = msgspec.json.encode(
    ToolsReply(ok=True, reason_code="found", reason="x" * 60, descriptors=[], summaries=[], next="x" * MAX_CURSOR_CHARS)
)
DEFAULT_MAX_PAYLOAD = 1_048_576
"""NATS's default ``max_payload``, bytes: a listing asked for outside a connection."""


def principal_of(subject: str) -> str:
    """The principal of ``tg.tools.{list,get}.<principal>``: the last token."""
    return subject.rsplit(".", 1)[-1]


def _visible(principal: str, descriptor: ToolDescriptor | None, ports: PolicyPorts) -> ToolDescriptor | None:
    engine = ports.policy.engine
    if descriptor is None or engine is None or not TOKEN.match(principal):
        return None
    return visible(engine, principal, descriptor)


async def list_page(principal: str, body: bytes, ports: PolicyPorts, max_payload: int) -> ToolsReply:
    """Answer one ``tg.tools.list.<principal>`` body (a page query; empty: the first page); never raises.

    A body that is no page query answers ``malformed`` (or ``oversized``), naming why.
    """
    query = page_query_of(body)
    if isinstance(query, tuple):
        return ToolsReply(ok=False, reason_code=query[0], reason=query[1])
    return await list_for(principal, ports, query, max_payload)


async def list_for(
    principal: str, ports: PolicyPorts, query: PageQuery | None = None, max_payload: int = DEFAULT_MAX_PAYLOAD
) -> ToolsReply:
    """One page of the latest version of each tool ``principal`` may call, with its callable operations only.

    Tools in name order after ``query.after``; the page fits ``max_payload`` bytes once
    encoded, and a tool too large for a page alone is listed as a :class:`ToolSummary`.
    Visibility is computed only for the tools the page looks at. Never raises: a registry
    that cannot be read answers ``registry_unavailable``, a cursor that is no tool name
    ``malformed``.
    """
    query = query or PageQuery()
    if query.after is not None and not TOOL_NAME.match(query.after):
        return ToolsReply(ok=False, reason_code="malformed", reason="after: not a tool name (the cursor of a page)")
    try:
        stored = sorted(await ports.descriptors.list(), key=lambda d: d.name)
    except Exception:  # any registry fault: no listing (the reply says so)
        return _UNREADABLE
    page, shown = PageFiller(items_budget(max_payload, _ENVELOPE), query.limit), []
    full = False
    for descriptor in (d for d in stored if query.after is None or d.name > query.after):
        if (visible := _visible(principal, descriptor, ports)) is None:
            continue
        if not page.offer(visible.name, msgspec.json.encode(visible), partial(_summaries, visible)):
            full = True
            break
        shown.append(visible)
    return _page_reply(page, shown, full)


def _summaries(descriptor: ToolDescriptor) -> Iterator[bytes]:
    """A tool's summaries, larger first: names of its operations and its description's start, then only its size."""
    size = len(msgspec.json.encode(descriptor))
    head = ToolSummary(name=descriptor.name, version=descriptor.version, size_bytes=size)
    yield msgspec.json.encode(
        msgspec.structs.replace(head, operations=tuple(descriptor.operations), description=descriptor.description[:200])
    )
    yield msgspec.json.encode(head)


def _page_reply(page: PageFiller, shown: list[ToolDescriptor], full: bool) -> ToolsReply:
    whole = [d for index, d in enumerate(shown) if index not in page.summarised]
    summaries = [_summary.decode(bytes(page.items[index])) for index in sorted(page.summarised)]
    count = f"{len(shown)} tools" + (" (more on the next page)" if full else "")
    return ToolsReply(
        ok=True,
        reason_code="found",
        reason=count,
        descriptors=whole,
        summaries=summaries or None,
        next=page.last_key if full else None,
    )


async def get_for(principal: str, body: bytes, ports: PolicyPorts) -> ToolsReply:
    """One tool (``{"tool": …, "version": … | null}``) as ``principal`` sees it.

    Never raises: a body that is not a lookup answers ``malformed``, a name or version that
    cannot exist ``invalid_tool`` / ``invalid_version``, and a tool that is missing or
    hidden ``unknown_tool`` with the same text.
    """
    try:
        query = decode_untrusted(_query, body)
    except msgspec.DecodeError as error:
        return ToolsReply(ok=False, reason_code="malformed", reason=f"not a lookup: {error}")
    if not TOOL_NAME.match(query.tool):
        return ToolsReply(ok=False, reason_code="invalid_tool", reason=f"tool must match {TOOL_NAME.pattern}")
    if query.version is not None and not SEMVER.match(query.version):
        return ToolsReply(ok=False, reason_code="invalid_version", reason="version must be a semantic version")
    try:
        stored = await ports.descriptors.get(query.tool, query.version)
    except Exception:  # any registry fault: no answer about the tool
        return _UNREADABLE
    if (shown := _visible(principal, stored, ports)) is None:
        code, reason = unknown_tool(query.tool, query.version)
        return ToolsReply(ok=False, reason_code=code, reason=reason)
    return ToolsReply(ok=True, reason_code="found", reason="found", descriptor=shown)
