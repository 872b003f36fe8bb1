"""Descriptors as MCP tools: schemas clients accept, hints from the side-effect class."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.surface.shaping import Target, hints, input_schema, mcp_tool, output_schema

OBJ = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {}}


def target(effect: SideEffectClass, adapter: str = "file_system", **spec: Any) -> Target:
    fields = {"input_schema": OBJ, "output_schema": OBJ, "risk_tier": RiskTier.LOW, **spec}
    return Target("t", "1.0.0", "op", OperationSpec(side_effect_class=effect, **fields), adapter)


def test_input_schemas_drop_the_draft_keep_defs_and_are_objects() -> None:
    schema = {"$schema": "x", "$id": "urn:x", "$defs": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}
    shaped = input_schema(schema)
    assert shaped["type"] == "object" and "$schema" not in shaped and "$id" not in shaped
    assert shaped["$defs"] == schema["$defs"] and shaped["oneOf"] == schema["oneOf"]


def test_an_mcp_upstreams_output_schema_is_its_structured_part_with_defs_at_the_root() -> None:
    envelope = {
        "type": "object",
        "properties": {"structured": {"type": "object", "properties": {"x": {"$ref": "#/$defs/x"}}}},
        "$defs": {"x": {"type": "integer"}},
    }
    shaped = output_schema(envelope, mcp_envelope=True)
    assert shaped is not None and shaped["properties"]["x"] == {"$ref": "#/$defs/x"} and "$defs" in shaped
    assert output_schema({"properties": {"structured": {"type": ["object", "null"]}}}, mcp_envelope=True) is None


def test_results_that_are_not_always_objects_have_no_output_schema() -> None:
    assert output_schema({"type": "array"}, mcp_envelope=False) is None
    assert output_schema({"anyOf": [{"type": "object"}]}, mcp_envelope=False) is None


@pytest.mark.parametrize(
    ("effect", "read_only", "destructive"),
    [
        (SideEffectClass.READ_ONLY, True, None),
        (SideEffectClass.REVERSIBLE_WRITE, False, False),
        (SideEffectClass.IRREVERSIBLE_WRITE, False, True),
        (SideEffectClass.FINANCIAL, False, True),
    ],
)
def test_hints_follow_the_side_effect_class(effect: SideEffectClass, read_only: bool, destructive: bool | None) -> None:
    hinted = hints(target(effect, open_world=True))
    assert (hinted.read_only_hint, hinted.destructive_hint, hinted.open_world_hint) == (read_only, destructive, True)
    assert hinted.idempotent_hint is (True if read_only else None)


def test_the_description_says_what_kind_of_call_it_is() -> None:
    tool = mcp_tool("t__op", target(SideEffectClass.IRREVERSIBLE_WRITE, description="Deletes a branch."))
    assert tool.description is not None
    assert tool.description.startswith("Deletes a branch.") and "irreversible write" in tool.description
