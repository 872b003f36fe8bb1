"""JSON Schema (draft 2020-12) validation with jsonschema-rs, compiled once per schema.

Errors name the failing location as a JSON Pointer (RFC 6901) into the instance.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema_rs

__all__ = ["SchemaError", "check_schema", "first_error"]


class SchemaError(ValueError):
    """A schema is itself invalid."""


@lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> Any:
    return jsonschema_rs.validator_for(json.loads(schema_json), validate_formats=True)


def _validator(schema: dict[str, Any]) -> Any:
    return _compiled(json.dumps(schema, sort_keys=True))


def check_schema(schema: dict[str, Any]) -> None:
    """Compile ``schema`` against its meta-schema (draft 2020-12 unless ``$schema`` says otherwise).

    Raises:
        SchemaError: the schema is not a valid JSON Schema.
    """
    if not isinstance(schema, dict):
        raise SchemaError("a schema must be a JSON object")
    try:
        jsonschema_rs.meta.validate(schema)
        _validator(schema)
    except (jsonschema_rs.ValidationError, ValueError) as error:
        raise SchemaError(str(error).splitlines()[0]) from None


def first_error(schema: dict[str, Any], instance: Any) -> str | None:
    """Return ``"<json pointer>: <message>"`` of the first violation, or ``None`` if valid."""
    for error in _validator(schema).iter_errors(instance):
        pointer = "/" + "/".join(str(part) for part in error.instance_path)
        return f"{pointer}: {error.message}"
    return None
