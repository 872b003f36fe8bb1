"""Characters that render as nothing or change how text around them reads (pure).

Used wherever agent text is shown to a person (chat cards) or must be readable as given
(idempotency keys): such a character could make ``notes/a<U+034F>.txt`` read as
``notes/a.txt`` or a path read reversed (U+202E).
"""

from __future__ import annotations

import unicodedata

__all__ = ["is_invisible", "shown_escaped"]

_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})
_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)


def is_invisible(ch: str) -> bool:
    """Whether the one character ``ch`` renders as nothing or reorders the text around it."""
    code = ord(ch)
    return unicodedata.category(ch) in _CATEGORIES or any(low <= code <= high for low, high in _RANGES)


def shown_escaped(text: str, keep: str = "") -> str:
    """``text`` with each invisible character (``keep`` excepted) as a JSON-style escape.

    A character above U+FFFF is written as its UTF-16 surrogate pair, as JSON does (RFC 8259 §7).
    """
    return "".join(_escaped(ch) if ch not in keep and is_invisible(ch) else ch for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
