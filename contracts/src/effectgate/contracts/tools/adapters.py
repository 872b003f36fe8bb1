"""The adapters an executor has: what a descriptor's ``adapter`` may name.

``python:<worker>`` names a tool worker (``effectgate worker``) serving Python tools on the bus
(:mod:`effectgate.contracts.tools.hosting`); ``<worker>`` is its NATS user ``worker-<worker>``.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Final

__all__ = ["ADAPTERS", "FILE_SYSTEM", "MCP", "PYTHON", "SERVER_NAME", "adapter_kind", "adapter_problem"]

FILE_SYSTEM: Final = "file_system"
MCP: Final = "mcp"
PYTHON: Final = "python"

ADAPTERS: Final = {FILE_SYSTEM: "file_system", MCP: "mcp:<server>", PYTHON: "python:<worker>"}
"""Every adapter kind an executor has, with how a descriptor spells it."""

SERVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}\Z")
"""What an MCP server or a tool worker name may be; ``mcp_<name>`` is then a valid tool name."""


def adapter_kind(adapter: str) -> tuple[str, str] | None:
    """``(kind, name)`` of a known adapter (the server or worker; empty for ``file_system``); ``None``: unknown."""
    kind, colon, server = adapter.partition(":")
    if kind == FILE_SYSTEM and not colon:
        return kind, ""
    if kind in (MCP, PYTHON) and SERVER_NAME.match(server):
        return kind, server
    return None


def adapter_problem(adapter: str, mcp_servers: Collection[str] | None = None) -> str | None:
    """What is wrong with ``adapter``, as ``"adapter: …"``; ``None`` when an executor has it.

    Args:
        adapter: a descriptor's ``adapter``.
        mcp_servers: the configured MCP server names; ``None``: any well-formed name is taken.
    """
    known = adapter_kind(adapter)
    if known is None:
        spelled = " or ".join(repr(spelling) for spelling in ADAPTERS.values())
        return f"adapter: {adapter[:80]!r} is no adapter the executor has (it has {spelled})"
    if known[0] == MCP and mcp_servers is not None and known[1] not in mcp_servers:
        configured = ", ".join(sorted(mcp_servers)) or "none"
        return f"adapter: {adapter!r} names no configured MCP server (configured: {configured})"
    return None
