"""Schemas from type hints: pydantic, msgspec, Optional, enums, Annotated constraints, defaults; self-contained."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal, Optional

import annotated_types
import msgspec
import pydantic
import pytest

from effectgate.contracts.tools.hosting import ReconcileAnswer
from effectgate.contracts.tools.schemas import check_schema, check_self_contained, first_error
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import Context, DeclarationError, Dispatcher, Effect, Provided, Reconciled, Secrets, Toolbox, tool
from tools.tests.support import Progress, call_of

READ = SideEffectClass.READ_ONLY


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    number: Annotated[int, pydantic.Field(ge=1)]


class Person(pydantic.BaseModel):
    name: str
    home: Address
    tags: list[str] = []


class Point(msgspec.Struct):
    x: float
    y: float


class Segment(msgspec.Struct):
    start: Point
    end: Point


class Clock:
    """A dependency: never in a schema."""


received: dict[str, Any] = {}


@tool(side_effect=READ, risk=RiskTier.LOW)
async def shapes(
    person: Person,
    segment: Segment,
    context: Context,
    secrets: Secrets,
    clock: Provided[Clock],
    colour: Colour = Colour.RED,
    nickname: Optional[str] = None,  # noqa: UP045 - the Optional spelling is one of the shapes supported
    middle: str | None = None,
    count: Annotated[int, annotated_types.Ge(0), annotated_types.Le(10)] = 3,
    label: Annotated[str, pydantic.Field(min_length=2, description="a label")] = "ab",
    mode: Literal["fast", "slow"] = "fast",
    when: datetime | None = None,
    points: list[Point] | None = None,
) -> Person:
    """Every shape at once."""
    received.update(person=person, segment=segment, colour=colour, count=count, when=when, points=points)
    return person


def schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    spec = Toolbox([shapes], worker="w").descriptors()[0].operations["shapes"]
    return spec.input_schema, spec.output_schema


def test_the_input_schema_has_one_property_per_argument_and_none_for_what_is_injected() -> None:
    inputs, _ = schemas()
    assert list(inputs["properties"]) == [
        "person", "segment", "colour", "nickname", "middle", "count", "label", "mode", "when", "points",
    ]  # fmt: skip
    assert inputs["required"] == ["person", "segment"] and inputs["additionalProperties"] is False


def test_generated_schemas_are_valid_and_self_contained() -> None:
    for schema in schemas():
        check_self_contained(schema)
        check_schema(schema)
    inputs = schemas()[0]
    assert set(inputs["$defs"]) == {"Address", "Segment", "Point"}  # a top-level model is inlined by pydantic
    assert inputs["properties"]["person"]["properties"]["home"] == {"$ref": "#/$defs/Address"}


def test_constraints_defaults_and_optionals_are_in_the_schema() -> None:
    properties = schemas()[0]["properties"]
    assert (properties["count"]["minimum"], properties["count"]["maximum"], properties["count"]["default"]) == (
        0,
        10,
        3,
    )
    assert (properties["label"]["minLength"], properties["label"]["description"]) == (2, "a label")
    assert properties["colour"]["default"] == "red" and properties["mode"]["enum"] == ["fast", "slow"]
    assert {"type": "null"} in properties["nickname"]["anyOf"] and {"type": "null"} in properties["middle"]["anyOf"]


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"person": {"name": "a", "home": {"street": "s", "number": 0}}}, "/person/home/number"),
        ({"segment": {"start": {"x": 1}, "end": {"x": 1, "y": 2}}}, "/segment/start"),
        ({"count": 11}, "/count"),
        ({"colour": "green"}, "/colour"),
        ({"label": "a"}, "/label"),
    ],
)
def test_the_input_schema_refuses_what_the_types_refuse(arguments: dict[str, Any], pointer: str) -> None:
    valid = {"person": {"name": "a", "home": {"street": "s", "number": 1}}, "segment": _segment()}
    problem = first_error(schemas()[0], {**valid, **arguments})
    assert problem is not None and problem.startswith(f"{pointer}:")


def _segment() -> dict[str, Any]:
    return {"start": {"x": 0, "y": 0}, "end": {"x": 1, "y": 1}}


async def test_arguments_arrive_as_their_types() -> None:
    box = Toolbox([shapes], worker="w")
    dispatcher = Dispatcher(box, dependencies=_clock())
    person = {"name": "a", "home": {"street": "s", "number": 1}}
    when = "2025-01-02T03:04:05Z"
    arguments = {"person": person, "segment": _segment(), "colour": "blue", "when": when, "points": [{"x": 1, "y": 2}]}
    answer = await dispatcher.answer(call_of(box, "shapes", **arguments), Progress())
    assert answer.outcome == "ok" and answer.result == {**person, "tags": []}
    assert isinstance(received["person"], Person) and isinstance(received["segment"].start, Point)
    assert received["colour"] is Colour.BLUE and received["when"] == datetime.fromisoformat(when)
    assert received["points"] == [Point(1, 2)]


def _clock() -> Any:
    from effectgate.tools import Dependencies

    return Dependencies().provide(Clock, Clock)


@tool(side_effect=READ, risk=RiskTier.LOW)
async def effect_of_struct() -> Effect[Segment]:
    return Effect(Segment(Point(0, 0), Point(1, 1)), effect_id="e")


@tool(side_effect=READ, risk=RiskTier.LOW)
async def stream_of_models() -> AsyncIterator[Address]:
    yield Address(street="s", number=1)


@tool(side_effect=READ, risk=RiskTier.LOW)
async def reconciled() -> Reconciled:
    return ReconcileAnswer(resolution="ran")


@tool(side_effect=READ, risk=RiskTier.LOW)
async def nothing() -> None:
    return None


@tool(side_effect=READ, risk=RiskTier.LOW, output={"type": "object", "properties": {"n": {"type": "integer"}}})
async def overridden() -> dict[str, Any]:
    return {"n": 1}


def output_of(target: Any) -> dict[str, Any]:
    descriptor = Toolbox([target], worker="w").descriptors()[0]
    return next(iter(descriptor.operations.values())).output_schema


def test_the_output_schema_unwraps_effect_streams_and_reconciled() -> None:
    assert output_of(effect_of_struct)["$ref"] == "#/$defs/Segment"
    stream = output_of(stream_of_models)
    assert (stream["type"], stream["items"]["title"]) == ("array", "Address")
    assert output_of(reconciled)["$ref"] == "#/$defs/ReconcileAnswer"
    assert output_of(reconciled)["$defs"] == msgspec.json.schema(ReconcileAnswer)["$defs"]
    assert output_of(nothing) == {"type": "null"}
    assert output_of(overridden) == {"type": "object", "properties": {"n": {"type": "integer"}}}
    for target in (effect_of_struct, stream_of_models, reconciled):
        check_schema(output_of(target))


def test_a_streaming_operation_is_declared_streaming() -> None:
    spec = Toolbox([stream_of_models], worker="w").descriptors()[0].operations["stream_of_models"]
    assert spec.streaming is True


def test_a_parameter_or_result_without_a_type_is_refused() -> None:
    async def untyped(value) -> int:  # type: ignore[no-untyped-def]
        return 0

    async def no_return(value: int):  # type: ignore[no-untyped-def]
        return 0

    with pytest.raises(DeclarationError, match="parameter 'value' needs a type hint"):
        Toolbox([tool(side_effect=READ, risk=RiskTier.LOW)(untyped)], worker="w")
    with pytest.raises(DeclarationError, match="the return annotation is missing"):
        Toolbox([tool(side_effect=READ, risk=RiskTier.LOW)(no_return)], worker="w")


def test_a_type_neither_library_describes_is_refused() -> None:
    async def odd(value: Clock) -> int:
        return 0

    with pytest.raises(DeclarationError, match="has no JSON Schema"):
        Toolbox([tool(side_effect=READ, risk=RiskTier.LOW)(odd)], worker="w")
