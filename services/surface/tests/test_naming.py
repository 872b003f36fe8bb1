"""MCP names: within 64 characters, stable, unique, readable where they can be."""

from __future__ import annotations

import re

import pytest

from effectgate.surface.naming import MAX_NAME, mcp_name, name_all

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_a_short_safe_pair_is_tool_double_underscore_operation() -> None:
    assert mcp_name("file_system", "read") == "file_system__read"


@pytest.mark.parametrize(
    ("tool", "operation"),
    [
        ("t" * 63, "read"),  # too long together
        ("git", "op." * 40),  # dots: some clients refuse them
        ("git", "ünïcode"),
        ("a__b", "c"),  # a tool holding the separator would make the split ambiguous
        ("a", "b__c"),
    ],
)
def test_every_name_is_safe_within_64_characters_and_stable(tool: str, operation: str) -> None:
    name = mcp_name(tool, operation)
    assert SAFE.match(name) and len(name) <= MAX_NAME
    assert name == mcp_name(tool, operation)


def test_pairs_that_would_read_alike_get_different_names() -> None:
    pairs = [("a__b", "c"), ("a", "b__c"), ("t" * 63, "x"), ("t" * 63, "y"), ("git", "op.1"), ("git", "op_1")]
    named = name_all(pairs, frozenset())
    assert len(named) == len(pairs)
    assert set(named.values()) == set(pairs)


def test_a_flat_tool_keeps_its_operation_names_unless_another_entry_claims_them() -> None:
    pairs = [("everything", "echo"), ("everything", "add"), ("other", "echo"), ("t", "x")]
    named = name_all(pairs, frozenset({"everything", "other"}))
    assert named["add"] == ("everything", "add")
    assert named["everything__echo"] == ("everything", "echo")  # two flat tools want "echo": neither gets it
    assert named["other__echo"] == ("other", "echo")
    assert named["t__x"] == ("t", "x")


def test_a_flat_name_never_shadows_a_prefixed_one() -> None:
    named = name_all([("flat", "a__b"), ("a", "b")], frozenset({"flat"}))
    assert named["a__b"] == ("a", "b") and named["flat__a__b"] == ("flat", "a__b")
