r"""MCP tool names for effectgate operations: within 64 characters, stable, never colliding.

One MCP tool per (effectgate tool, operation) a principal may call. The scheme, in order:

1. A tool named in ``flat`` lists each operation under the operation's own name, when that
   name is a *safe* name (``^[A-Za-z0-9_-]{1,64}$``) and no other entry of the listing
   claims it; otherwise it falls back to rule 2.
2. ``<tool>__<operation>`` when the operation name is safe, the tool name holds no ``__``
   and the whole fits in 64 characters. Tool names never contain ``__`` in this form, so
   the first ``__`` splits the name back into tool and operation: two pairs never share it.
3. Otherwise ``<tool>__<operation, unsafe characters as _>`` cut so that
   ``_h<10 hex>`` (the first 40 bits of SHA-256 of ``<tool>\\0<operation>``) still fits
   in 64 characters.

A name depends only on its pair (and, for rule 1, on the listing it is in), so a client
that saw a name keeps it across restarts and replicas. Safe names keep to the characters
every common client accepts (some reject ``.`` in function names); 64 is the limit several
clients put on a tool name although the specification allows 128 (MCP 2025-11-25, Tools,
"Tool names").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "SEPARATOR", "mcp_name", "name_all"]

MAX_NAME = 64
SEPARATOR = "__"
_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX_HEX = 10


def mcp_name(tool: str, operation: str) -> str:
    """The prefixed MCP name of ``operation`` of ``tool`` (rules 2 and 3 of the module docstring)."""
    plain = f"{tool}{SEPARATOR}{operation}"
    if SEPARATOR not in tool and _SAFE.match(operation) and len(plain) <= MAX_NAME:
        return plain
    digest = hashlib.sha256(f"{tool}\0{operation}".encode()).hexdigest()[:_SUFFIX_HEX]
    suffix = f"_h{digest}"
    readable = _UNSAFE_CHAR.sub("_", plain)
    return readable[: MAX_NAME - len(suffix)] + suffix


def name_all(pairs: Iterable[tuple[str, str]], flat: frozenset[str]) -> dict[str, tuple[str, str]]:
    """Every pair's MCP name: ``{name: (tool, operation)}``, names unique.

    Args:
        pairs: ``(tool, operation)`` of one principal's listing.
        flat: tools whose operations keep their own names where they can (rule 1).

    Returns:
        The names in the order of ``pairs``; a pair whose name another pair already holds
        (a 40-bit digest collision, never seen) is left out rather than shadowing it.
    """
    listed = list(pairs)
    prefixed = {pair: mcp_name(*pair) for pair in listed}
    wanted: dict[str, list[tuple[str, str]]] = {}
    for tool, operation in listed:
        if tool in flat and _SAFE.match(operation):
            wanted.setdefault(operation, []).append((tool, operation))
    taken = set(prefixed.values())
    flat_names = {pairs_[0]: name for name, pairs_ in wanted.items() if len(pairs_) == 1 and name not in taken}
    named: dict[str, tuple[str, str]] = {}
    for pair in listed:
        named.setdefault(flat_names.get(pair, prefixed[pair]), pair)
    return named
