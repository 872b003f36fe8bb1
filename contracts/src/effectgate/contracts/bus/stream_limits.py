"""When JetStream refuses a message because its store is full."""

from __future__ import annotations

import re

__all__ = ["STORE_FULL_CODES", "store_full"]

STORE_FULL_CODES = frozenset({10023, 10047})
"""JetStream error codes that always mean the store has no room (module docstring)."""

_STORE_FAILED = 10077
_LIMIT_HIT = re.compile(r"^maximum [a-z ]+ exceeded$")


def store_full(error: BaseException) -> str | None:
    """What is full, when ``error`` is JetStream refusing a message for want of room; else ``None``.

    Returns:
        The server's description (e.g. ``maximum bytes exceeded``), or ``None`` for any
        other error.
    """
    code, description = getattr(error, "err_code", None), str(getattr(error, "description", None) or "")
    if code in STORE_FULL_CODES or (code == _STORE_FAILED and _LIMIT_HIT.match(description)):
        return description or "no storage left"
    return None
