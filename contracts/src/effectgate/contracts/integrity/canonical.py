"""Canonical JSON, the hashes built on it, and the values it can represent.

Canonical form is RFC 8785 (JSON Canonicalization Scheme), produced by the
``rfc8785`` package; hashes are SHA-256 rendered as ``sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

import rfc8785

from effectgate.contracts.errors import Problem

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "NoCanonicalForm",
    "canonical_bytes",
    "json_pointer",
    "sha256_hex",
    "unrepresentable",
]

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer magnitude an IEEE 754 double holds exactly (I-JSON, RFC 7493 §2.2)."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a value (the root counts as depth 1)."""


class NoCanonicalForm(Problem, rfc8785.CanonicalizationError):
    """A value has no RFC 8785 canonical form; the message names where, as :func:`unrepresentable` does.

    Also an ``rfc8785.CanonicalizationError`` (a ``ValueError``), as the library raises.
    """


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON bytes of a JSON-compatible ``value``.

    Raises:
        NoCanonicalForm: ``value`` holds something JSON cannot represent canonically,
            named by its JSON Pointer (see :func:`unrepresentable`); a
            ``rfc8785.CanonicalizationError`` and so a ``ValueError``.
    """
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError, RecursionError) as error:
        raise NoCanonicalForm(f"no canonical JSON form at {unrepresentable(value) or error}") from None


def sha256_hex(value: Any) -> str:
    """Return ``sha256:<64 hex>`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()


def unrepresentable(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Find the first part of ``value`` that RFC 8785 canonical JSON cannot represent.

    Checks, without recursion (so a hostile depth cannot exhaust the stack): integers
    beyond ±(2**53 − 1), NaN and infinities, strings and object keys that are not valid
    Unicode, non-string object keys, nesting deeper than ``max_depth``, and any value
    that is not JSON (``None``, bool, int, float, str, list, dict).

    Returns:
        ``"<JSON Pointer (RFC 6901)>: <what is wrong>"`` for the first such part, or
        ``None`` when the whole value is representable.
    """
    pending: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while pending:
        item, path = pending.pop()
        problem = _scalar_problem(item) if not isinstance(item, dict | list) else None
        if problem is None and isinstance(item, dict | list) and len(path) >= max_depth:
            problem = f"nested deeper than {max_depth} levels"
        if problem is None and isinstance(item, dict):
            problem = _key_problem(item)
        if problem is not None:
            return f"{json_pointer(path)}: {problem}"
        pending.extend(_children(item, path))
    return None


def _children(item: Any, path: tuple[str, ...]) -> list[tuple[Any, tuple[str, ...]]]:
    if isinstance(item, dict):
        return [(child, (*path, str(key))) for key, child in reversed(item.items())]
    if isinstance(item, list):
        return [(child, (*path, str(index))) for index, child in reversed(list(enumerate(item)))]
    return []


def _scalar_problem(item: Any) -> str | None:
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):
        return None if abs(item) <= MAX_SAFE_INTEGER else "integer beyond ±(2**53 - 1) has no exact JSON number"
    if isinstance(item, float):
        return None if math.isfinite(item) else "NaN and infinity (a number beyond ±1.8e308) are not JSON numbers"
    if isinstance(item, str):
        return None if _is_unicode(item) else "string is not valid Unicode (lone surrogate)"
    return f"{type(item).__name__} is not a JSON value"


def _key_problem(item: dict[Any, Any]) -> str | None:
    for key in item:
        if not isinstance(key, str):
            return f"object key {key!r} is not a string"
        if not _is_unicode(key):
            return "object key is not valid Unicode (lone surrogate)"
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_pointer(path: Iterable[str]) -> str:
    """RFC 6901 JSON Pointer of ``path`` (``~`` → ``~0``, ``/`` → ``~1``); ``""`` is the root."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)
