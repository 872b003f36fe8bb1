"""Every flaw a strict decoder refuses is named by its RFC 6901 JSON Pointer, in every position.

Each flaw kind is put in each position (an object member, an array element, deep inside
both, under member names that need ``~0``/``~1`` escapes); the pointer named must be the
place, checked by resolving it with the ``jsonpointer`` library in the permissively decoded
value where one exists.
"""

from __future__ import annotations

import json
import math
import random
import time
from typing import Any

import jsonpointer
import msgspec
import pytest
import rfc8785

from effectgate.contracts.integrity.canonical import MAX_DEPTH, NoCanonicalForm, canonical_bytes, unrepresentable
from effectgate.contracts.json_flaws import flaw_of

VALUE_FLAWS = {
    "above-double": (b"1e400", "NaN and infinity"),
    "below-double": (b"-1e999", "NaN and infinity"),
    "nan": (b"NaN", "NaN and infinity"),
    "infinity": (b"Infinity", "NaN and infinity"),
    "negative-infinity": (b"-Infinity", "NaN and infinity"),
    "big-integer": (b"123456789012345678901234567890", "integer beyond"),
    "integer-past-int-conversion": (b"-" + b"9" * 5000, "integer beyond"),
    "lone-high-surrogate": (b'"a\\ud800b"', "not valid Unicode"),
    "lone-low-surrogate": (b'"\\udfff"', "not valid Unicode"),
    "reversed-pair": (b'"\\udc00\\ud800"', "not valid Unicode"),
    "invalid-utf8": (b'"\xff\xfe"', "invalid UTF-8 (byte "),
    "truncated-utf8": (b'"\xc3("', "invalid UTF-8 (byte "),
    "encoded-surrogate": (b'"\xed\xa0\x80"', "invalid UTF-8 (byte "),
    "not-a-literal": (b"tru", "not JSON"),
}
KEY_FLAWS = {
    "lone-surrogate-key": (b'"\\ud800"', "object key is not valid Unicode"),
    "invalid-utf8-key": (b'"\xff"', "invalid UTF-8 (byte "),
}
POSITIONS: list[tuple[bytes, str]] = [
    (b'{"a": X}', "/a"),
    (b'{"ok": 1, "a": [0, "s", X]}', "/a/2"),
    (b'[{"x": [1, {"y/z": {"~k": X}}]}]', "/0/x/1/y~1z/~0k"),
    (b'{"a": {"b": [[], [X, 1]]}, "c": 2}', "/a/b/1/0"),
    (b'{"s": "a, b: [c]", "t": "\\"{", "u": [X]}', "/u/0"),
]


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _located(position: bytes, flaw: bytes) -> str | None:
    return flaw_of(position.replace(b"X", flaw))


@pytest.mark.parametrize("kind", list(VALUE_FLAWS))
@pytest.mark.parametrize(("position", "pointer"), POSITIONS)
def test_a_flawed_value_is_named_by_its_pointer(kind: str, position: bytes, pointer: str) -> None:
    flaw, problem = VALUE_FLAWS[kind]
    found = _located(position, flaw)

    assert found is not None and found.startswith(f"{pointer}: "), found
    assert problem in found


@pytest.mark.parametrize("kind", list(KEY_FLAWS))
@pytest.mark.parametrize(("position", "pointer"), POSITIONS)
def test_a_flawed_member_name_names_its_object(kind: str, position: bytes, pointer: str) -> None:
    flaw, problem = KEY_FLAWS[kind]
    found = _located(position, b"{" + flaw + b": 1}")

    assert found is not None and found.startswith(f"{pointer}: "), found
    assert problem in found


RESOLVABLE = [k for k in VALUE_FLAWS if "utf" not in k and k not in ("not-a-literal", "integer-past-int-conversion")]
"""The kinds Python's ``json`` decodes with its defaults (so the pointer can be resolved in the value)."""


@pytest.mark.parametrize("kind", RESOLVABLE)
def test_the_pointer_resolves_to_the_flawed_value(kind: str) -> None:
    flaw, _ = VALUE_FLAWS[kind]
    for position, _pointer in POSITIONS:
        text = position.replace(b"X", flaw)
        found = flaw_of(text)
        assert found is not None
        resolved = jsonpointer.resolve_pointer(json.loads(text), found.split(": ", 1)[0])
        assert unrepresentable(resolved) is not None or (isinstance(resolved, float) and not math.isfinite(resolved))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200, 5_000, 50_000])
def test_nesting_too_deep_is_named_at_the_first_container_past_the_limit(depth: int) -> None:
    text = b'{"a": {"b~/": ' + b"[" * depth + b"]" * depth + b"}}"
    found = flaw_of(text)

    assert found == "/a/b~0~1" + "/0" * (MAX_DEPTH - 2) + f": nested deeper than {MAX_DEPTH} levels"


def test_the_depth_walk_agrees_with_the_canonical_check_on_generated_values() -> None:
    """Where both can run (below the decoder's recursion limit), both name the same container."""
    rng = random.Random(8)
    for _ in range(150):
        value: Any = 1
        for _ in range(rng.randint(MAX_DEPTH + 1, 400)):
            key = rng.choice(["a", "b/c", "~x", "é", " ", 'q"r', "1", "[", ","])
            value = [0] * rng.randint(0, 3) + [value, {"z": [1]}] if rng.random() < 0.5 else {"p": [1], key: value}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        deeper_after = b'{"x": ' + text + b', "y": ' + b"[" * 5000 + b"]" * 5000 + b"}"  # past json's limit
        expected = unrepresentable({"x": value})
        assert flaw_of(b'{"x": ' + text + b"}") == expected
        assert flaw_of(deeper_after) == expected, "the walk past the decoder's limit names another container"


@pytest.mark.parametrize(
    "text",
    [b'{"a": [1, 2.5, "x"], "b": {"c": null}}', b"[]", b'"\\ud83d\\ude00"', b"9007199254740991", b'{"a": 1, "a": 2}'],
)
def test_a_text_without_flaws_has_none(text: bytes) -> None:
    assert flaw_of(text) is None


@pytest.mark.parametrize("text", [b"1e400", b"NaN", b'"\\ud800"', b"\xff", b"{", b"", b'{"a": 1,'])
def test_a_flaw_of_the_whole_text_is_left_to_the_decoders_message(text: bytes) -> None:
    assert flaw_of(text) is None


@pytest.mark.parametrize(
    "text",
    [b'"\\"' * 30_000, b"[" + b"1," * 30_000 + b"\xff]", b'["aa",' * 12_000 + b"\xff", b'{"k": ' * 20_000],
    ids=["escaped-quotes", "long-array", "many-strings", "deep-objects"],
)
def test_locating_takes_linear_time(text: bytes) -> None:
    started = time.process_time()  # CPU time: not stretched by a loaded machine
    flaw_of(text)
    assert time.process_time() - started < 2.0


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        ({"a": [1, math.inf]}, "/a/1"),
        ({"n": {"x/y": 2**60}}, "/n/x~1y"),
        ({"s": ["ok", "\ud800"]}, "/s/1"),
        ({"k": {"\udfff": 1}}, "/k"),
        ({"d": _nested(3000)}, "/d" + "/0" * (MAX_DEPTH - 1)),
    ],
    ids=["infinity", "big-integer", "lone-surrogate", "lone-surrogate-key", "too-deep-for-rfc8785"],
)
def test_canonical_bytes_names_the_pointer_of_what_has_no_canonical_form(value: Any, pointer: str) -> None:
    with pytest.raises(NoCanonicalForm, match=f"^no canonical JSON form at {pointer}: ") as raised:
        canonical_bytes(value)
    assert isinstance(raised.value, rfc8785.CanonicalizationError | ValueError)


def test_what_the_locator_names_the_strict_decoder_refuses() -> None:
    """A flaw named in a request is one msgspec (the request edge's decoder) refuses or the canonical check does."""
    for flaw, _ in VALUE_FLAWS.values():
        for position, _pointer in POSITIONS:
            text = position.replace(b"X", flaw)
            try:
                decoded = msgspec.json.decode(text)
            except msgspec.DecodeError:
                continue
            assert unrepresentable(decoded) is not None, text
