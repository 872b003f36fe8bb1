"""Schemas are self-contained: remote references are refused at the gate and never fetched anywhere."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from effectgate.contracts.tools.schemas import SchemaError, SchemaUnusable, check_schema, ensure_usable, first_error

REMOTE = "{base}/remote.json"


def _fill(value: Any, base: str) -> Any:
    """``value`` with every ``{base}`` in its strings replaced by the test server's base URL."""
    if isinstance(value, dict):
        return {key: _fill(item, base) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, base) for item in value]
    return value.replace("{base}", base) if isinstance(value, str) else value


REMOTE_REFERENCES = {
    "top-level": ({"$ref": REMOTE}, "/$ref"),
    "in-properties": ({"type": "object", "properties": {"a": {"$ref": REMOTE}}}, "/properties/a/$ref"),
    "in-items": ({"type": "array", "items": {"$ref": REMOTE}}, "/items/$ref"),
    "in-allOf": ({"allOf": [{"type": "object"}, {"$ref": REMOTE}]}, "/allOf/1/$ref"),
    "in-defs": ({"$defs": {"x": {"$ref": REMOTE}}, "$ref": "#/$defs/x"}, "/$defs/x/$ref"),
    "deep": ({"properties": {"a": {"anyOf": [{"not": {"prefixItems": [{"$ref": REMOTE}]}}]}}}, None),
    "dynamicRef": ({"$dynamicRef": REMOTE + "#meta"}, "/$dynamicRef"),
    "recursiveRef": (
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveRef": "other.json"},
        "/$recursiveRef",
    ),
    "relative-not-fragment": ({"properties": {"a": {"$ref": "other.json#/x"}}}, "/properties/a/$ref"),
    "relative-to-remote-id": ({"$id": "{base}/root.json", "$ref": "remote.json"}, "/$ref"),
    "property-named-ref": ({"properties": {"$ref": {"$ref": REMOTE}}}, "/properties/$ref/$ref"),
    "property-named-const": ({"properties": {"const": {"$ref": REMOTE}}}, "/properties/const/$ref"),
    "def-named-default": ({"$defs": {"default": {"items": {"$ref": REMOTE}}}}, "/$defs/default/items/$ref"),
    "escaped-name": ({"properties": {"a/b~c": {"$ref": REMOTE}}}, "/properties/a~1b~0c/$ref"),
    "unknown-keyword": ({"x-extra": {"$ref": REMOTE}}, "/x-extra/$ref"),
    "draft-07-definitions": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"$ref": REMOTE}}},
        "/definitions/d/$ref",
    ),
}
DEEP_POINTER = "/properties/a/anyOf/0/not/prefixItems/0/$ref"


def test_the_library_fetches_a_remote_reference_by_default(remote: Any) -> None:
    """The premise, and proof that the counting server is reachable: without a retriever, it is fetched."""
    jsonschema_rs.validator_for({"$ref": f"{remote.base}/remote.json"})
    assert remote.hits == ["/remote.json"]


@pytest.mark.parametrize("case", sorted(REMOTE_REFERENCES))
def test_a_reference_outside_the_schema_is_refused_naming_its_pointer(remote: Any, case: str) -> None:
    schema, pointer = REMOTE_REFERENCES[case]
    pointer = pointer or DEEP_POINTER
    with pytest.raises(SchemaError) as refused:
        check_schema(_fill(schema, remote.base))
    assert refused.value.pointer == pointer
    assert str(refused.value).startswith(f"{pointer}: ")
    assert "same-document" in str(refused.value)
    assert remote.hits == []


NOT_REFERENCES_TO_THE_LIBRARY = {"recursiveRef", "unknown-keyword"}
"""Cases jsonschema-rs never resolves (``$recursiveRef`` other than ``#``, a keyword it does not know)."""


@pytest.mark.parametrize("case", sorted(REMOTE_REFERENCES))
def test_a_stored_schema_with_a_remote_reference_is_unusable_and_never_fetched(remote: Any, case: str) -> None:
    """Past the gate (a schema that never went through it), compiling still fetches nothing."""
    schema = _fill(REMOTE_REFERENCES[case][0], remote.base)
    if case in NOT_REFERENCES_TO_THE_LIBRARY:
        assert first_error(schema, {"a": 1}) is None
    else:
        with pytest.raises(SchemaUnusable) as unusable:
            first_error(schema, {"a": 1})
        assert str(unusable.value).startswith("schema cannot be compiled: ")
        with pytest.raises(SchemaUnusable):
            ensure_usable(schema)
    assert remote.hits == []


def test_an_unknown_meta_schema_is_refused_not_fetched(remote: Any) -> None:
    schema = {"$schema": f"{remote.base}/meta.json", "type": "object"}
    with pytest.raises(SchemaError) as refused:
        check_schema(schema)
    assert refused.value.pointer == "/$schema"
    with pytest.raises(SchemaUnusable):
        ensure_usable(schema)
    assert remote.hits == []


def test_a_fragment_into_data_that_holds_a_remote_reference_is_refused_not_fetched(remote: Any) -> None:
    """The walk leaves ``const`` alone; the compile's retriever still refuses what a fragment reaches there."""
    schema = {"$ref": "#/const", "const": {"$ref": f"{remote.base}/remote.json"}}
    with pytest.raises(SchemaError) as refused:
        check_schema(schema)
    assert "self-contained" in str(refused.value)
    assert remote.hits == []


LOCAL_SCHEMAS = {
    "defs": (
        {"$defs": {"name": {"type": "string", "minLength": 1}}, "properties": {"a": {"$ref": "#/$defs/name"}}},
        {"a": "x"},
        {"a": ""},
    ),
    "root-recursion": (
        {"type": "object", "properties": {"child": {"$ref": "#"}}, "additionalProperties": False},
        {"child": {"child": {}}},
        {"child": {"other": 1}},
    ),
    "anchor": ({"$defs": {"n": {"$anchor": "num", "type": "number"}}, "items": {"$ref": "#num"}}, [1, 2], [1, "x"]),
    "embedded-id": (
        {
            "$defs": {
                "e": {"$id": "https://example.invalid/e.json", "$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}
            },
            "$ref": "#/$defs/e",
        },
        "text",
        3,
    ),
    "dynamic": (
        {"$dynamicAnchor": "node", "type": "object", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}},
        {"kids": [{}]},
        {"kids": [1]},
    ),
    "draft-07": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"d": {"type": "integer"}},
            "items": {"$ref": "#/definitions/d"},
        },
        [1],
        ["1"],
    ),
    "property-named-ref": (
        {"properties": {"$ref": {"type": "string"}}, "required": ["$ref"]},
        {"$ref": "x"},
        {"$ref": 1},
    ),
    "ref-strings-as-data": (
        {"const": {"$ref": "http://example.invalid/x"}, "examples": [{"$ref": "y.json"}]},
        {"$ref": "http://example.invalid/x"},
        {"$ref": "z"},
    ),
}


@pytest.mark.parametrize("case", sorted(LOCAL_SCHEMAS))
def test_same_document_references_still_validate(remote: Any, case: str) -> None:
    schema, good, bad = LOCAL_SCHEMAS[case]
    check_schema(schema)
    assert first_error(schema, good) is None
    problem = first_error(schema, bad)
    assert problem is not None and problem.startswith("/")
    assert remote.hits == []


def test_a_schema_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(SchemaError, match="JSON object"):
        check_schema([{"$ref": "#"}])  # type: ignore[arg-type]


def test_a_very_deep_schema_is_walked_without_recursion(remote: Any) -> None:
    schema: dict[str, Any] = {"$ref": f"{remote.base}/remote.json"}
    for _ in range(5000):
        schema = {"not": schema}
    with pytest.raises(SchemaError) as refused:
        check_schema(schema)
    assert refused.value.pointer == "/not" * 5000 + "/$ref"
    assert remote.hits == []
