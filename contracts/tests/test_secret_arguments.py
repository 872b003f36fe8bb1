"""Secret arguments: which properties are secret, the envelope, and what the policy accepts."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey

from effectgate.contracts.integrity.sealing import (
    MAX_SEALED_CHARS,
    SEALED_LABEL,
    SealedInvalid,
    generate_sealing_keypair,
    is_envelope,
    load_sealing_private_key,
    load_sealing_public_key,
    seal,
    unseal,
)
from effectgate.contracts.tools.schemas import SchemaUnusable, first_error
from effectgate.contracts.tools.secret_arguments import (
    policy_schema,
    redact_sealed,
    replace_secrets,
    sealing_problem,
    secret_arguments,
)

KEY = PrivateKey.generate()
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "password": {"type": "string", "minLength": 8, "writeOnly": True},
        "db": {
            "type": "object",
            "properties": {
                "host": {"type": "string"},
                "token": {"type": "string", "x-effectgate-secret": True},
                "tls": {"type": "object", "properties": {"client~key/pem": {"type": "string", "writeOnly": True}}},
            },
            "additionalProperties": False,
        },
        "card": {
            "type": "object",
            "writeOnly": True,
            "properties": {"pan": {"type": "string", "writeOnly": True}},
            "required": ["pan"],
        },
    },
    "required": ["user", "password"],
    "additionalProperties": False,
}


def _sealed(value: Any) -> dict[str, str]:
    return seal(value, KEY.public_key)


def test_secret_properties_top_level_and_nested_with_escaped_pointers() -> None:
    pointers = [secret.pointer for secret in secret_arguments(SCHEMA)]
    assert sorted(pointers) == ["/card", "/db/tls/client~0key~1pem", "/db/token", "/password"]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "array", "items": {"type": "string", "writeOnly": True}}, "/items"),
        ({"properties": {"xs": {"type": "array", "items": {"writeOnly": True}}}}, "/properties/xs/items"),
        (
            {"$defs": {"s": {"type": "string", "writeOnly": True}}, "properties": {"a": {"$ref": "#/$defs/s"}}},
            "/$defs/s",
        ),
        ({"allOf": [{"properties": {"a": {"writeOnly": True}}}]}, "/allOf/0/properties/a"),
        ({"additionalProperties": {"x-effectgate-secret": True}}, "/additionalProperties"),
        ({"patternProperties": {"^p": {"writeOnly": True}}}, "/patternProperties/^p"),
        ({"writeOnly": True, "type": "object"}, ""),
    ],
)
def test_a_marker_where_it_cannot_be_sealed_makes_the_schema_unusable(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(SchemaUnusable) as caught:
        secret_arguments(schema)
    assert caught.value.pointer == where


def test_a_non_boolean_effectgate_marker_is_refused() -> None:
    with pytest.raises(SchemaUnusable, match="/properties/a/x-effectgate-secret"):
        secret_arguments({"properties": {"a": {"x-effectgate-secret": "yes"}}})


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"writeOnly": {"type": "string"}}},  # a property named like the keyword
        {"properties": {"a": {"const": {"writeOnly": True}}}},  # data, not a schema
        {"properties": {"a": {"writeOnly": False}}},
    ],
)
def test_names_data_and_false_markers_are_not_secrets(schema: dict[str, Any]) -> None:
    assert secret_arguments(schema) == ()


def test_policy_schema_accepts_only_an_envelope_at_each_secret() -> None:
    transformed = policy_schema(SCHEMA)
    sealed = {"user": "u", "password": _sealed("hunter2!"), "db": {"token": _sealed("t")}}
    assert first_error(transformed, sealed) is None
    assert first_error(transformed, {**sealed, "password": {"$sealed": "QUJD", "x": 1}}) is not None
    assert first_error(transformed, {**sealed, "password": {"$sealed": "A" * (MAX_SEALED_CHARS + 4)}}) is not None
    assert SCHEMA["properties"]["password"]["writeOnly"] is True  # the original is untouched


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"user": "u", "password": "hunter2-SENTINEL"}, "/password"),
        ({"user": "u", "password": {"$sealed": "not base64!"}}, "/password"),
        ({"user": "u", "password": {"$sealed": "QUJD", "more": 1}}, "/password"),
        ({"user": "u", "password": 12345678}, "/password"),
        ({"user": "u", "password": _sealed("p"), "db": {"token": "tok-SENTINEL"}}, "/db/token"),
        (
            {"user": "u", "password": _sealed("p"), "db": {"tls": {"client~key/pem": "pem-SENTINEL"}}},
            "/db/tls/client~0key~1pem",
        ),
        ({"user": "u", "password": _sealed("p"), "card": {"pan": "4111-SENTINEL"}}, "/card"),
    ],
)
def test_a_secret_in_clear_is_refused_naming_the_pointer_never_the_value(arguments: dict[str, Any], where: str) -> None:
    found = sealing_problem(secret_arguments(SCHEMA), arguments)
    assert found is not None
    code, reason = found
    assert code == "secret_not_sealed" and reason.startswith(f"{where}: ")
    assert "SENTINEL" not in reason and "12345678" not in reason


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"user": _sealed("u"), "password": _sealed("p")}, "/user"),
        ({"user": "u", "password": _sealed("p"), "db": {"host": _sealed("h")}}, "/db/host"),
        ({"user": "u", "password": _sealed("p"), "extra": [1, {"$sealed": "QUJD"}]}, "/extra/1"),
        ({"user": "u", "password": _sealed("p"), "db": {"$sealed": "QUJD"}}, "/db"),
    ],
)
def test_an_envelope_where_no_secret_is_expected_is_refused(arguments: dict[str, Any], where: str) -> None:
    assert sealing_problem(secret_arguments(SCHEMA), arguments) == (
        "sealed_unexpected",
        f"{where}: a sealed envelope where the input schema has no secret argument",
    )


def test_sealed_and_absent_secrets_pass() -> None:
    secrets = secret_arguments(SCHEMA)
    assert sealing_problem(secrets, {"user": "u", "password": _sealed("hunter2!")}) is None
    assert sealing_problem(secrets, {"user": "u"}) is None  # the schema's required decides about absence


def test_seal_then_unseal_round_trips_any_json_value_and_is_randomized() -> None:
    for value in ("hunter2", 42, {"pan": "4111", "cvc": [1, 2]}, None):
        first, second = _sealed(value), _sealed(value)
        assert is_envelope(first) and first != second
        assert unseal(first, KEY) == unseal(second, KEY) == value


def test_unseal_refuses_another_key_changed_bytes_and_non_envelopes() -> None:
    envelope = _sealed("hunter2")
    with pytest.raises(SealedInvalid):
        unseal(envelope, PrivateKey.generate())
    raw = bytearray(base64.b64decode(envelope["$sealed"]))
    raw[-1] ^= 1
    with pytest.raises(SealedInvalid):
        unseal({"$sealed": base64.b64encode(bytes(raw)).decode()}, KEY)
    for bad in ({"$sealed": "QUJD"}, {"$sealed": "@@@@"}, "hunter2", {"$sealed": envelope["$sealed"], "x": 1}):
        with pytest.raises(SealedInvalid):
            unseal(bad, KEY)


def test_replace_secrets_copies_and_replaces_only_present_secrets() -> None:
    arguments = {"user": "u", "password": "p", "db": {"host": "h", "token": "t"}}
    replaced = replace_secrets(arguments, secret_arguments(SCHEMA), lambda secret, value: f"<{secret.pointer}>")
    assert replaced == {"user": "u", "password": "</password>", "db": {"host": "h", "token": "</db/token>"}}
    assert arguments["password"] == "p"


def test_redact_shows_a_label_never_the_ciphertext() -> None:
    envelope = _sealed("hunter2")
    shown = redact_sealed({"a": envelope, "b": [envelope, {"c": "plain"}]})
    assert shown == {"a": SEALED_LABEL, "b": [SEALED_LABEL, {"c": "plain"}]}


def test_key_files_private_mode_and_round_trip(tmp_path: Path) -> None:
    generate_sealing_keypair(tmp_path)
    assert (tmp_path / "sealing.key").stat().st_mode & 0o777 == 0o600
    private, public = (
        load_sealing_private_key(tmp_path / "sealing.key"),
        load_sealing_public_key(tmp_path / "sealing.pub"),
    )
    assert unseal(seal("x", public), private) == "x"
    (tmp_path / "bad.pub").write_text(base64.b64encode(b"short").decode())
    with pytest.raises(ValueError, match="32 bytes"):
        load_sealing_public_key(tmp_path / "bad.pub")
