"""A refused descriptor names every mistake at its path, a mistyped key with the key meant.

The variants are generated: each field of a descriptor, of an operation and of a rate limit,
mistyped (its last letter doubled), in place of the right key, whether the descriptor comes
from a descriptor file (start-up) or signed over the bus (``effectgate tools publish``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.integrity.signing import sign_value
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.registry.domain import MAX_MISTAKES_SHOWN, parse_descriptor, parse_publish_request
from effectgate.registry.errors import PublishRefused

OPERATOR = Ed25519PrivateKey.generate()
SHIPPED: dict[str, Any] = json.loads((Path(__file__).parents[3] / "deploy/tools/file_system.json").read_text())


def from_file(descriptor: dict[str, Any]) -> str:
    with pytest.raises(PublishRefused) as refused:
        parse_descriptor(json.dumps(descriptor).encode())
    assert refused.value.reason_code == "malformed"
    return refused.value.reason


def over_the_bus(descriptor: dict[str, Any]) -> str:
    body = json.dumps({"descriptor": descriptor, "signature": sign_value(descriptor, OPERATOR)}).encode()
    with pytest.raises(PublishRefused) as refused:
        parse_publish_request(body, OPERATOR.public_key())
    assert refused.value.reason_code == "malformed"
    return refused.value.reason


READERS = [from_file, over_the_bus]


def renamed(table: dict[str, Any], key: str) -> dict[str, Any]:
    """``table`` with ``key`` mistyped (last letter doubled), in the same place."""
    return {(name + name[-1] if name == key else name): value for name, value in table.items()}


def with_every_key(table: dict[str, Any], kind: type[msgspec.Struct]) -> dict[str, Any]:
    """``table`` with every field of ``kind`` it lacks set to a value of the right type."""
    filler = {"description": "d", "rate_limit": {"calls": 1, "period_s": 1}, "open_world": False, "cost": 1}
    filler |= {"destination": "/url", "amount": "/amount", "timeout_s": 5, "secrets": ["TOKEN"]}
    filler |= {"concurrency_safe": True, "serialize_by": "/path", "retry": {"attempts": 1}, "streaming": False}
    filler |= {"idempotent_at_target": False, "reconcile": "read"}
    return table | {
        name: filler[name] for name in (f.encode_name for f in msgspec.structs.fields(kind)) if name not in table
    }


def cases() -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """(the path of the mistyped key, the descriptor holding it) for every field of every level."""
    full = with_every_key(SHIPPED, ToolDescriptor)
    read = with_every_key(full["operations"]["read"], OperationSpec)
    found = [(key, lambda key=key: renamed(full, key)) for key in full]
    found += [
        (
            f"operations.read.{key}",
            lambda key=key: {**full, "operations": {**full["operations"], "read": renamed(read, key)}},
        )
        for key in read
    ]
    found += [
        (f"rate_limit.{key}", lambda key=key: {**full, "rate_limit": renamed(full["rate_limit"], key)})
        for key in ("calls", "period_s")
    ]
    return found


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize(("path", "made"), cases(), ids=[path for path, _ in cases()])
def test_each_mistyped_key_is_named_with_the_key_meant(
    read: Callable[..., str], path: str, made: Callable[[], dict[str, Any]]
) -> None:
    meant = path.rsplit(".", 1)[-1]

    reason = read(made())

    assert f'{path}{meant[-1]}: unknown field; did you mean "{meant}"?' in reason, reason
    assert "missing required field" not in reason, reason


@pytest.mark.parametrize("read", READERS)
def test_every_mistake_of_one_descriptor_is_named_each_at_its_path(read: Callable[..., str]) -> None:
    read_op = {**SHIPPED["operations"]["read"], "risk_tier": "HIGH"}
    read_op["side_efect_class"] = read_op.pop("side_effect_class")
    mistaken = {
        **SHIPPED,
        "timeout_s": "ten",
        "rate_limit": {"calls": 5, "period": 60},
        "operations": {**SHIPPED["operations"], "read": read_op},
    }

    reason = read(mistaken)

    assert reason.startswith("not a tool descriptor: 4 mistakes: (1) "), reason
    for said in (
        "timeout_s: expected `float`, got `str`",
        'rate_limit.period: unknown field; did you mean "period_s"?',
        "operations.read.risk_tier: invalid enum value 'HIGH'",
        'operations.read.side_efect_class: unknown field; did you mean "side_effect_class"?',
    ):
        assert said in reason, reason


def test_the_mistakes_named_are_bounded_and_the_rest_counted() -> None:
    mistaken = {**SHIPPED, **{f"extra_{index}": 1 for index in range(MAX_MISTAKES_SHOWN + 5)}}

    reason = from_file(mistaken)

    assert f"{MAX_MISTAKES_SHOWN + 5} mistakes" in reason and reason.endswith("; and 5 more"), reason
    assert reason.count(": unknown field") == MAX_MISTAKES_SHOWN


@pytest.mark.parametrize(
    ("body", "said"), [(b"[1, 2", "not a tool descriptor: "), (b"[1, 2]", "expected `object`, got `array`")]
)
def test_what_is_no_json_object_is_refused_as_msgspec_words_it(body: bytes, said: str) -> None:
    with pytest.raises(PublishRefused, match="malformed|not a tool descriptor") as refused:
        parse_descriptor(body)
    assert said in refused.value.reason, refused.value.reason


def test_a_mistyped_key_of_the_publish_request_itself_is_named() -> None:
    body = json.dumps({"descriptor": SHIPPED, "signatur": sign_value(SHIPPED, OPERATOR)}).encode()

    with pytest.raises(PublishRefused) as refused:
        parse_publish_request(body, OPERATOR.public_key())

    assert 'signatur: unknown field; did you mean "signature"?' in refused.value.reason
