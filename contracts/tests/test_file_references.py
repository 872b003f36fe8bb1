"""Which arguments name files: declared by ``x-effectgate-file`` in supported places only."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.contracts.tools.file_references import FILE_MARKER, Reference, file_places, file_references
from effectgate.contracts.tools.schemas import SchemaUnusable

PATH = {"type": "string", FILE_MARKER: True}
FILES = {"type": "array", "items": {"type": "string"}, FILE_MARKER: True}


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def test_a_single_path_a_list_of_paths_and_a_nested_path_are_references() -> None:
    schema = _object(path=PATH, files=FILES, options=_object(target=PATH), content={"type": "string"})
    arguments = {"path": "a.txt", "files": ["b.txt", "c/d.txt"], "options": {"target": "e"}, "content": "x"}

    assert file_places(schema) == (("files",), ("path",), ("options", "target"))  # outermost first, by name
    assert file_references(schema, arguments) == (
        Reference("/files/0", "b.txt"),
        Reference("/files/1", "c/d.txt"),
        Reference("/path", "a.txt"),
        Reference("/options/target", "e"),
    )


def test_an_absent_argument_makes_no_reference_and_a_value_that_is_no_string_has_no_path() -> None:
    schema = _object(path=PATH, files=FILES)

    assert file_references(schema, {}) == ()
    assert file_references(schema, {"path": 7, "files": ["ok", {"x": 1}]}) == (
        Reference("/files/0", "ok"),
        Reference("/files/1", None),
        Reference("/path", None),
    )


def test_a_name_with_a_slash_or_tilde_is_escaped_in_the_pointer() -> None:
    schema = _object(**{"a/b": PATH, "c~d": PATH})

    assert [r.pointer for r in file_references(schema, {"a/b": "x", "c~d": "y"})] == ["/a~1b", "/c~0d"]


def test_an_unmarked_schema_names_no_file() -> None:
    assert file_references(_object(path={"type": "string"}), {"path": "a.txt"}) == ()


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (_object(files={"type": "array", "items": PATH}), "/properties/files/items/x-effectgate-file"),
        ({**_object(), "$defs": {"p": PATH}}, "/$defs/p/x-effectgate-file"),
        ({"anyOf": [_object(path=PATH)]}, "/anyOf/0/properties/path/x-effectgate-file"),
        ({**_object(), "additionalProperties": PATH}, "/additionalProperties/x-effectgate-file"),
        ({**_object(), FILE_MARKER: True}, "/x-effectgate-file"),
        (_object(path={"type": "string", FILE_MARKER: "yes"}), "/properties/path/x-effectgate-file"),
        (_object(path={"type": "string", FILE_MARKER: True, "writeOnly": True}), "/properties/path/x-effectgate-file"),
    ],
    ids=["in-items", "in-defs", "in-anyOf", "additionalProperties", "on-root", "not-boolean", "also-secret"],
)
def test_a_marker_that_would_bind_nothing_is_refused_naming_its_pointer(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(SchemaUnusable) as refused:
        file_places(schema)

    assert refused.value.pointer == where


def test_a_marker_named_as_data_or_a_property_name_is_no_marker() -> None:
    schema = _object(**{FILE_MARKER: {"type": "string"}}, kind={"enum": [{FILE_MARKER: True}]})

    assert file_places(schema) == ()
