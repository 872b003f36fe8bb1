"""Characters that render as nothing or reorder text are found and shown escaped."""

from __future__ import annotations

import json

import pytest

from effectgate.shared.secrets.invisible import is_invisible, shown_escaped

HIDDEN = ["\u202e", "\u200b", "\u2066", "\x00", "\u2028", "\u034f", "\ufe0f", "\U000e0100"]
HIDDEN += ["\u3164", "\u115f", "\u2800"]


@pytest.mark.parametrize("ch", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_each_hidden_character_is_found_and_escaped_as_json_would(ch: str) -> None:
    assert is_invisible(ch)
    shown = shown_escaped(f"notes/a{ch}.txt")
    assert ch not in shown and json.loads(f'"{shown}"') == f"notes/a{ch}.txt"


@pytest.mark.parametrize("text", ["notes/a.txt", "é ü 中文 ✅ emoji 🚀", "tab-free text, with spaces"])
def test_visible_text_is_left_as_it_is(text: str) -> None:
    assert shown_escaped(text) == text and not any(map(is_invisible, text))


def test_kept_characters_stay() -> None:
    assert shown_escaped("a\nb\u200b", keep="\n") == "a\nb\\u200b"
