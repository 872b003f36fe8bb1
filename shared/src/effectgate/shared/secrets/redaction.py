"""Redacting secrets from what the executor emits: the pure rules (no I/O, no detector library)."""

from __future__ import annotations

import bisect
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "MIN_KNOWN_CHARS",
    "Detector",
    "Redactor",
    "Span",
    "placeholder",
    "pointer",
    "secret_key_name",
    "secret_value",
]

Span = tuple[str, int, int]
"""``(kind, start, end)``: a secret of ``kind`` at ``text[start:end]``."""

Detector = Callable[[str], Iterable[Span]]
"""Finds the secrets of one text."""

MIN_KNOWN_CHARS = 8
"""Shortest configured secret value matched exactly; shorter ones would redact ordinary words."""

_SECRET_WORDS = (
    r"password|passwd|pwd|passphrase|secret|client_secret|token|api_?key|apikey|access_?key|"
    r"secret_?key|secret_access_key|private_?key|auth_?key|authorization|cookie|set_cookie|credentials?"
)
_SECRET_NAME = re.compile(rf"(?:[a-z0-9]+_)*(?:{_SECRET_WORDS})")
_PLACEHOLDER_VALUE = re.compile(r"\[redacted[:\]]|\$\{|\{\{|^<.*>$|^\$[A-Za-z_]|^[^A-Za-z0-9]*$|^(?:null|none)$", re.I)
_PLACEHOLDER = re.compile(r"\[redacted:[a-z_]+ sha256:[0-9a-f]{12}\]")
PROSE_WORDS = 5
"""A value of at least this many words is prose, not a credential (``"please choose one …"``)."""


def placeholder(kind: str, secret: str) -> str:
    """``[redacted:<kind> sha256:<first 12 hex of SHA-256(secret, UTF-8)>]``: informative, never the value."""
    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"[redacted:{kind} sha256:{digest}]"


def pointer(parent: str, token: str | int) -> str:
    """RFC 6901 JSON Pointer of ``token`` under ``parent`` (``~`` → ``~0``, ``/`` → ``~1``)."""
    return f"{parent}/{str(token).replace('~', '~0').replace('/', '~1')}"


def secret_key_name(name: str) -> bool:
    """Whether an object member named ``name`` holds a secret (case, ``-`` and spaces ignored).

    ``password``, ``db_password``, ``X-Api-Key``, ``aws_secret_access_key``, ``Authorization``
    are; ``token_type``, ``max_tokens``, ``password_policy`` and ``primary_key`` are not.
    """
    normal = re.sub(r"[-\s.]+", "_", name.strip().lower())
    return _SECRET_NAME.fullmatch(normal) is not None


def secret_value(value: Any) -> bool:
    """Whether ``value``, held by a secret-named member, is redacted.

    It is when a number, or a string that is neither a placeholder (``***``, ``${VAR}``,
    ``<token>``, ``null``) nor prose (:data:`PROSE_WORDS` words or more).
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if not isinstance(value, str) or _PLACEHOLDER_VALUE.search(value.strip()):
        return False
    return len(value.split()) < PROSE_WORDS


class Redactor:
    """Replaces secrets in texts and JSON-like values (module doc).

    Args:
        detector: finds secrets in one text.
        known: operator-configured secret values; those shorter than :data:`MIN_KNOWN_CHARS`
            characters are ignored.
    """

    def __init__(self, detector: Detector, known: Iterable[str] = ()) -> None:
        values = sorted({value for value in known if len(value) >= MIN_KNOWN_CHARS}, key=len, reverse=True)
        self._detector = detector
        self._known = re.compile("|".join(map(re.escape, values))) if values else None

    def text(self, text: str) -> str:
        """``text`` with each secret replaced by its :func:`placeholder` (``text`` itself when clean)."""
        spans = _merged(self._spans(text))
        if not spans:
            return text
        parts, last = [], 0
        for kind, start, end in spans:
            parts += [text[last:start], placeholder(kind, text[start:end])]
            last = end
        parts.append(text[last:])
        return "".join(parts)

    def value(self, value: Any, at: str) -> tuple[Any, tuple[str, ...]]:
        """A copy of ``value`` (JSON-like: dict, list, str, numbers) with secrets replaced.

        Args:
            value: the value; other types are kept as they are.
            at: JSON Pointer of ``value`` itself (``/result``).

        Returns:
            The scrubbed copy and the pointers of what changed, in document order.
        """
        found: list[str] = []
        return self._walk(value, at, found), tuple(dict.fromkeys(found))

    def _spans(self, text: str) -> list[Span]:
        """What to redact: detector and configured-value spans, except inside an earlier placeholder."""
        spans = list(self._detector(text))
        if self._known is not None:
            spans += [("configured", match.start(), match.end()) for match in self._known.finditer(text)]
        if "[redacted:" not in text:
            return spans
        kept = [match.span() for match in _PLACEHOLDER.finditer(text)]
        starts = [start for start, _ in kept]
        return [span for span in spans if not _inside(span, kept, starts)]

    def _walk(self, value: Any, at: str, found: list[str]) -> Any:
        if isinstance(value, str):
            clean = self.text(value)
            if clean is not value:
                found.append(at)
            return clean
        if isinstance(value, dict):
            return self._mapping(value, at, found)
        if isinstance(value, list | tuple):
            return [self._walk(item, pointer(at, index), found) for index, item in enumerate(value)]
        return value

    def _mapping(self, mapping: dict[Any, Any], at: str, found: list[str]) -> dict[Any, Any]:
        clean: dict[Any, Any] = {}
        for key, item in mapping.items():
            name = self.text(key) if isinstance(key, str) else key
            if name is not key:
                found.append(at)  # the key itself was a secret: the parent is named
            where = pointer(at, name)
            if isinstance(key, str) and secret_key_name(key) and secret_value(item):
                clean[name] = placeholder("secret_field", str(item))
                found.append(where)
            else:
                clean[name] = self._walk(item, where, found)
        return clean


def _inside(span: Span, kept: list[tuple[int, int]], starts: list[int]) -> bool:
    """Whether ``span`` overlaps one of the sorted, disjoint ``kept`` ranges (binary search)."""
    index = bisect.bisect_left(starts, span[2]) - 1  # the last range starting before the span ends
    return index >= 0 and kept[index][1] > span[1]


def _merged(spans: list[Span]) -> list[Span]:
    """Non-empty spans sorted by start, overlapping ones joined (the first one's kind is kept)."""
    merged: list[Span] = []
    for kind, start, end in sorted((s for s in spans if s[2] > s[1]), key=lambda s: (s[1], -s[2])):
        if merged and start < merged[-1][2]:
            first, begin, stop = merged[-1]
            merged[-1] = (first, begin, max(stop, end))
        else:
            merged.append((kind, start, end))
    return merged
