"""Answers of ``tg.tools.list.<principal>`` and ``tg.tools.get.<principal>``: the tools a caller may call.

The broker edge (:mod:`effectgate.policy.handlers.listings`) reads the query and the principal,
the subject's last token (the transport's word; NATS permissions let agent ``<p>`` ask only as
``<p>``).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import msgspec

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.bus.paging import MAX_CURSOR_CHARS, PageQuery
from effectgate.contracts.rpc.listing import ToolsQuery, ToolsReply, ToolSummary
from effectgate.contracts.tools.descriptors import SEMVER, TOOL_NAME, ToolDescriptor
from effectgate.policy.in_force.visibility import unknown_tool, visible
from effectgate.policy.service import PolicyPorts
from effectgate.shared.consumer.paging import PageFiller, items_budget

__all__ = ["DEFAULT_MAX_PAYLOAD", "get_tool", "list_for"]

_UNREADABLE = ToolsReply(ok=False, reason_code="registry_unavailable", reason="the registry cannot be read")
_summary = msgspec.json.Decoder(ToolSummary)
_ENVELOPE = msgspec.json.encode(
    ToolsReply(ok=True, reason_code="found", reason="x" * 60, descriptors=[], summaries=[], next="x" * MAX_CURSOR_CHARS)
)
DEFAULT_MAX_PAYLOAD = 1_048_576
"""NATS's default ``max_payload``, bytes: a listing asked for outside a connection."""


def _visible(principal: str, descriptor: ToolDescriptor | None, ports: PolicyPorts) -> ToolDescriptor | None:
    engine = ports.policy.engine
    if descriptor is None or engine is None or not TOKEN.match(principal):
        return None
    return visible(engine, principal, descriptor)


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


async def get_tool(principal: str, query: ToolsQuery, ports: PolicyPorts) -> ToolsReply:
    """One tool (``query``: its name and version, ``None``: the latest) as ``principal`` sees it.

    Never raises: a name or version that cannot exist answers ``invalid_tool`` /
    ``invalid_version``, and a tool that is missing or hidden ``unknown_tool`` with the same text.
    """
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
