"""The wire contract of per-caller tool listing and of service readiness.

``tg.tools.list.<principal>`` and ``tg.tools.get.<principal>``
(:class:`~effectgate.contracts.bus.catalog.Rpc`) answer with a :class:`ToolsReply`: only the
tools, and of each only the operations, the current policy lets ``<principal>`` call (directly
or with an approval).
"""

from __future__ import annotations

import msgspec

from effectgate.contracts.tools.descriptors import ToolDescriptor

__all__ = ["Readiness", "ToolSummary", "ToolsQuery", "ToolsReply"]


class ToolsQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.tools.get.<principal>``: a tool and an exact version, or ``None`` for the latest."""

    tool: str
    version: str | None = None


class ToolSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool listed without its schemas: its descriptor alone does not fit one listing page.

    Attributes:
        name: the tool.
        version: its latest version.
        size_bytes: its descriptor's JSON as listed, bytes.
        operations: the operations the caller may call (``()`` when even their names do not fit).
        description: the first 200 characters of its description.
    """

    name: str
    version: str
    size_bytes: int
    operations: tuple[str, ...] = ()
    description: str = ""


class ToolsReply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Answer of ``tg.tools.list.<principal>`` / ``tg.tools.get.<principal>``.

    Attributes:
        ok: the lookup found something (a listing is ``ok`` even when empty).
        reason_code: ``found``, or why not (``unknown_tool``, ``invalid_tool``,
            ``invalid_version``, ``malformed``, ``registry_unavailable``).
        reason: human-readable reason.
        descriptor: ``get``: the tool as the caller sees it (its callable operations only).
        descriptors: ``list``: the latest version of each tool the caller may call, by name
            (one page of them).
        summaries: ``list``: the tools of this page too large to list whole (``get`` each).
        next: ``list``: the cursor of the next page (``None``: the last page).
    """

    ok: bool
    reason_code: str
    reason: str
    descriptor: ToolDescriptor | None = None
    descriptors: list[ToolDescriptor] | None = None
    summaries: list[ToolSummary] | None = None
    next: str | None = None


class Readiness(msgspec.Struct, frozen=True, kw_only=True):
    """Whether a service can do its work now, and why not.

    Attributes:
        ready: ``True`` only when it can (for the policy service: a valid, non-empty
            policy set is loaded).
        reason: what it has loaded, or what is missing.
        version: the policy service: the version of the policy in force (``sha256:<hex>``),
            ``None`` when none is.
        replica: the policy service: which replica answered (``<host>:<pid>``).
    """

    ready: bool
    reason: str
    version: str | None = None
    replica: str | None = None
