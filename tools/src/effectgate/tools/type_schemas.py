"""JSON Schemas (draft 2020-12) from type hints, and arguments converted back into those types.

A type pydantic can describe is described by ``pydantic.TypeAdapter`` (pydantic models,
dataclasses, enums, ``Optional``, ``Annotated`` with ``pydantic.Field`` or ``annotated_types``
constraints); any other (msgspec ``Struct`` s and containers of them) by ``msgspec.json.schema``.
One annotation mixing a pydantic model with a msgspec ``Struct`` is not supported. Nested
definitions are lifted into the root's ``$defs``: every schema is self-contained.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import msgspec
import pydantic

from effectgate.contracts.tools.schemas import SchemaError, check_schema
from effectgate.tools.context import Effect
from effectgate.tools.errors import DeclarationError

__all__ = ["Argument", "TypeShape", "input_schema", "jsonable", "output_type", "shape_of", "with_defs"]

Mode = Literal["validation", "serialization"]
_STREAMS = (AsyncIterator, AsyncGenerator, AsyncIterable)


@dataclass(frozen=True)
class TypeShape:
    """One annotation's schema (its own ``$defs`` apart) and how a JSON value becomes that type."""

    schema: dict[str, Any]
    defs: dict[str, Any]
    convert: Callable[[Any], Any]


@dataclass(frozen=True)
class Argument:
    """One parameter that is an argument: its name, annotation and default (``inspect.Parameter.empty``: none)."""

    name: str
    annotation: Any
    default: Any = inspect.Parameter.empty


def _shape(annotation: Any, mode: Mode) -> TypeShape:
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
    except pydantic.PydanticSchemaGenerationError:
        schema = msgspec.json.schema(annotation)
        return _split(schema, lambda value: msgspec.convert(value, annotation, strict=False))
    return _split(adapter.json_schema(mode=mode), adapter.validate_python)


def _split(schema: dict[str, Any], convert: Callable[[Any], Any]) -> TypeShape:
    body = dict(schema)
    return TypeShape(body, body.pop("$defs", {}), convert)


def shape_of(annotation: Any, mode: Mode = "validation") -> TypeShape:
    """The :class:`TypeShape` of ``annotation``.

    Raises:
        DeclarationError: neither pydantic nor msgspec can describe it.
    """
    try:
        return _shape(annotation, mode)
    except (TypeError, ValueError, pydantic.PydanticUserError) as error:
        raise DeclarationError(f"type {annotation!r} has no JSON Schema: {' '.join(str(error).split())}") from None


def with_defs(schema: dict[str, Any], defs: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with ``defs`` as its root ``$defs`` (none when empty), checked self-contained and valid.

    Raises:
        DeclarationError: the result is no valid self-contained schema.
    """
    whole = {**schema, "$defs": dict(defs)} if defs else dict(schema)
    try:
        check_schema(whole)
    except SchemaError as error:
        raise DeclarationError(f"generated schema is not usable: {error}") from None
    return whole


def _merge(defs: dict[str, Any], more: Mapping[str, Any], where: str) -> None:
    for name, definition in more.items():
        if defs.setdefault(name, definition) != definition:
            raise DeclarationError(f"{where}: two different types are both named {name!r} in one schema")


def input_schema(arguments: list[Argument], where: str) -> dict[str, Any]:
    """The arguments object's schema: one property per argument, required unless it has a default.

    Raises:
        DeclarationError: an argument's type has no schema, or its default is not JSON.
    """
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for argument in arguments:
        shape = shape_of(argument.annotation)
        properties[argument.name] = _with_default(shape.schema, argument, where)
        _merge(defs, shape.defs, where)
    required = [a.name for a in arguments if a.default is inspect.Parameter.empty]
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return with_defs(schema, defs)


def _with_default(schema: dict[str, Any], argument: Argument, where: str) -> dict[str, Any]:
    if argument.default is inspect.Parameter.empty:
        return schema
    try:
        return {**schema, "default": jsonable(argument.default)}
    except (TypeError, ValueError) as error:
        raise DeclarationError(f"{where}: the default of {argument.name!r} is not JSON: {error}") from None


def output_type(annotation: Any, streaming: bool) -> tuple[Any, bool]:
    """``(the result's item type, whether it is wrapped in Effect)``: ``Effect[T]`` → ``T``, a stream's items ``T``."""
    if streaming and get_origin(annotation) in _STREAMS:
        return (get_args(annotation) or (Any,))[0], False
    if annotation is Effect or get_origin(annotation) is Effect:
        return (get_args(annotation) or (Any,))[0], True
    return annotation, False


def _encode_other(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON-able")


def jsonable(value: Any) -> Any:
    """``value`` as JSON builtins (msgspec ``to_builtins``; pydantic models by ``model_dump(mode="json")``).

    Raises:
        TypeError: a value neither knows.
    """
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return msgspec.to_builtins(value, enc_hook=_encode_other, str_keys=True)
