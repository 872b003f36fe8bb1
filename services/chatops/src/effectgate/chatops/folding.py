"""How a card shows the arguments: canonical, pretty, inert, folded, and never cut (pure).

Arguments are shown as RFC 8785 canonical JSON, pretty-printed. A string longer than
``fold_chars`` is folded: the card shows its start and a marker naming the part of the thread
that holds it in full.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from effectgate.contracts.integrity.canonical import canonical_bytes
from effectgate.shared.secrets.invisible import shown_escaped

__all__ = ["FOLD_PREVIEW_CHARS", "MAX_CARD_ARGUMENT_CHARS", "Folded", "shown_arguments", "visible"]

FOLD_PREVIEW_CHARS = 60
"""Characters of a folded value shown on the card (at most half of ``fold_chars``)."""

MAX_CARD_ARGUMENT_CHARS = 2500
"""Longest arguments text on a card; longer goes whole to the thread (Slack's text limit is 3000)."""


class Folded(msgspec.Struct, frozen=True, kw_only=True):
    """One long argument value (or all of them), shown in full in the card's thread.

    Attributes:
        number: 1-based, as the card's marker names it.
        pointer: RFC 6901 JSON Pointer of the value in the arguments; ``""`` for all of them.
        text: the whole value (a JSON string's text), inert (:func:`visible`).
    """

    number: int
    pointer: str
    text: str


def visible(text: str, keep: str = "") -> str:
    """``text`` with each invisible or direction-changing character escaped (:mod:`~effectgate.shared.secrets`)."""
    return shown_escaped(text, keep)


def shown_arguments(
    arguments: Any, fold_chars: int, max_chars: int = MAX_CARD_ARGUMENT_CHARS
) -> tuple[str, tuple[Folded, ...]]:
    """The arguments text of a card and the values that go to its thread.

    Returns:
        ``(text, folded)``: pretty canonical JSON with long strings folded; or, when that is
        still over ``max_chars``, a line naming the size and one :class:`Folded` holding all.
    """
    canonical = json.loads(canonical_bytes(arguments))  # RFC 8785 key order, kept by json.dumps
    text, folded = _folded(canonical, fold_chars)
    if len(text) <= max_chars:
        return text, folded
    whole = visible(json.dumps(canonical, indent=2, ensure_ascii=False), keep="\n")
    return f"[{len(whole):,} characters of arguments: in full in the thread (folded 1)]", (
        Folded(number=1, pointer="", text=whole),
    )


def _folded(canonical: Any, fold_chars: int) -> tuple[str, tuple[Folded, ...]]:
    folded: list[Folded] = []

    def visit(value: Any, pointer: str) -> Any:
        if isinstance(value, dict):
            return {k: visit(v, f"{pointer}/{_escape(k)}") for k, v in value.items()}
        if isinstance(value, list):
            return [visit(v, f"{pointer}/{i}") for i, v in enumerate(value)]
        if isinstance(value, str) and len(value) > fold_chars:
            folded.append(Folded(number=len(folded) + 1, pointer=pointer or "/", text=visible(value)))
            preview = value[: min(FOLD_PREVIEW_CHARS, fold_chars // 2)]
            return f"{preview}… [folded {len(folded)}: {len(value):,} chars, in full in the thread]"
        return value

    return visible(json.dumps(visit(canonical, ""), indent=2, ensure_ascii=False), keep="\n"), tuple(folded)


def _escape(key: str) -> str:
    """RFC 6901 §3: ``~`` as ``~0``, ``/`` as ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")
