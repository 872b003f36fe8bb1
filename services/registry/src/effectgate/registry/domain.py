"""Pure checks a tool descriptor passes before it is published.

Names are one subject token, versions are SemVer 2.0.0, and every operation's input
and output schema is itself a valid JSON Schema (checked against its meta-schema) and
self-contained: a reference that is not fragment-only (``#…``) is refused, and nothing
is ever fetched (:func:`effectgate.contracts.tools.schemas.check_schema`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypeVar

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.integrity.signing import verify_value
from effectgate.contracts.rpc.registry import PublishRequest
from effectgate.contracts.tools.descriptors import (
    OPERATION_NAME,
    SEMVER,
    TOOL_NAME,
    OperationSpec,
    RateLimit,
    ToolDescriptor,
    rate_limit_problem,
)
from effectgate.contracts.tools.file_references import file_places
from effectgate.contracts.tools.operation_checks import operation_problem, secrets_problem
from effectgate.contracts.tools.references import reference_problem
from effectgate.contracts.tools.schemas import SchemaError, check_schema
from effectgate.contracts.tools.secret_arguments import secret_arguments
from effectgate.registry.errors import LookupRefused, PublishRefused
from effectgate.shared.config.tables import problems

__all__ = [
    "MAX_DESCRIPTOR_BYTES",
    "check_lookup",
    "check_size",
    "mistakes",
    "parse_descriptor",
    "parse_publish_request",
    "validate_descriptor",
]

T = TypeVar("T", bound=msgspec.Struct)
_descriptor = msgspec.json.Decoder(ToolDescriptor)
MAX_DESCRIPTOR_BYTES = 262_144
"""Largest accepted descriptor, bytes."""

_publish = msgspec.json.Decoder(PublishRequest)
_json = msgspec.json.Decoder()

MAX_MISTAKES_SHOWN = 10
"""Most mistakes of one refused descriptor named in the refusal (the rest are counted)."""


def parse_descriptor(data: bytes) -> ToolDescriptor:
    """Decode and validate a descriptor.

    Raises:
        PublishRefused: oversized, malformed, or invalid (see :func:`validate_descriptor`).
    """
    descriptor = _bounded(_descriptor, ToolDescriptor, data, "a tool descriptor")
    validate_descriptor(descriptor)
    return descriptor


def _bounded(decoder: msgspec.json.Decoder[T], kind: type[T], data: bytes, what: str) -> T:
    """``data`` decoded, at most :data:`MAX_DESCRIPTOR_BYTES`.

    Raises:
        PublishRefused: ``oversized``, or ``malformed`` naming what it is not: every mistake
            of a JSON object (:func:`mistakes`), else why it is no JSON object.
    """
    if len(data) > MAX_DESCRIPTOR_BYTES:
        raise PublishRefused("oversized", f"request is {len(data)} bytes; the limit is {MAX_DESCRIPTOR_BYTES}")
    try:
        return decode_untrusted(decoder, data)
    except msgspec.DecodeError as error:
        try:
            value = decode_untrusted(_json, data)
        except msgspec.DecodeError:
            raise PublishRefused("malformed", f"not {what}: {error}") from None
        raise PublishRefused("malformed", f"not {what}: {mistakes(value, kind) or error}") from None


def mistakes(value: Any, kind: type[msgspec.Struct]) -> str:
    """Every mistake of JSON ``value`` as a ``kind``, each at its path, an unknown key with the closest known one.

    ``""`` when msgspec finds none to name (:func:`effectgate.shared.config.tables.problems`); at most
    :data:`MAX_MISTAKES_SHOWN` are named, then how many more there are.
    """
    found = problems(value, kind, "")
    if len(found) <= 1:
        return "".join(found)
    shown = "; ".join(f"({number}) {problem}" for number, problem in enumerate(found[:MAX_MISTAKES_SHOWN], 1))
    more = f"; and {len(found) - MAX_MISTAKES_SHOWN} more" if len(found) > MAX_MISTAKES_SHOWN else ""
    return f"{len(found)} mistakes: {shown}{more}"


def parse_publish_request(data: bytes, operator_key: Ed25519PublicKey | None) -> ToolDescriptor:
    """Decode a publish request, check the operator's signature, then the descriptor.

    Publishing is an operator's act: NATS permissions keep agents off ``tg.registry.publish``,
    and this check refuses a request that reached it anyway (permissions misconfigured).

    Raises:
        PublishRefused: ``oversized``, ``malformed``, ``not_operator`` (no operator key is
            configured, or the signature does not verify under it), or as :func:`validate_descriptor`.
    """
    request = _bounded(_publish, PublishRequest, data, "a publish request ({descriptor, signature})")
    if operator_key is None:
        raise PublishRefused(
            "not_operator", "no operator key is configured: descriptors are published at start-up only"
        )
    if not verify_value(request.descriptor, request.signature, operator_key):
        raise PublishRefused(
            "not_operator", "the descriptor is not signed by the operator key: only the operator publishes"
        )
    try:
        descriptor = msgspec.convert(request.descriptor, ToolDescriptor)
    except msgspec.ValidationError as error:
        raise PublishRefused(
            "malformed", f"not a tool descriptor: {mistakes(request.descriptor, ToolDescriptor) or error}"
        ) from None
    validate_descriptor(descriptor)
    return descriptor


def _check_rates(descriptor: ToolDescriptor) -> None:
    rates: list[tuple[str, RateLimit | None]] = [("rate_limit", descriptor.rate_limit)]
    rates += [(f"operations.{name}.rate_limit", op.rate_limit) for name, op in descriptor.operations.items()]
    for where, rate in rates:
        if rate is not None and (problem := rate_limit_problem(rate)):
            raise PublishRefused("invalid_limits", f"{where}.{problem}")


def validate_descriptor(descriptor: ToolDescriptor, mcp_servers: Collection[str] | None = None) -> None:
    """Check name, version, limits, adapter, pointers and every schema.

    Args:
        descriptor: the descriptor.
        mcp_servers: the configured MCP server names an ``mcp:<server>`` adapter must be
            one of (``None``: any well-formed name).

    Raises:
        PublishRefused: ``invalid_name``, ``invalid_version``, ``invalid_limits``,
            ``invalid_adapter`` (no adapter the executor has:
            :mod:`effectgate.contracts.tools.adapters`) or ``invalid_pointer`` (a ``destination`` /
            ``amount`` / ``cost`` / ``serialize_by`` that names no declared argument or one of a
            type it cannot read, or a cost below 0), ``invalid_operation`` (a ``retry`` on a write
            not idempotent at its target, a ``reconcile`` or ``streaming`` that cannot work:
            :mod:`effectgate.contracts.tools.operation_checks`), an ``invalid_name`` secret, or
            ``schema_invalid`` (naming the operation, the schema and, for a reference to
            anything outside the schema, the keyword's JSON
            Pointer).
    """
    if not TOOL_NAME.match(descriptor.name):
        raise PublishRefused("invalid_name", f"tool name {descriptor.name!r} must match {TOOL_NAME.pattern}")
    if not SEMVER.match(descriptor.version):
        raise PublishRefused("invalid_version", f"{descriptor.version!r} is not a semantic version")
    if descriptor.timeout_s <= 0 or descriptor.rate_limit.calls < 1 or descriptor.rate_limit.period_s <= 0:
        raise PublishRefused("invalid_limits", "timeout_s, rate_limit.calls and rate_limit.period_s must be positive")
    _check_rates(descriptor)
    if not descriptor.operations:
        raise PublishRefused("schema_invalid", "a tool needs at least one operation")
    _check_operation_names(descriptor)
    if dangling := reference_problem(descriptor, mcp_servers):
        raise PublishRefused(*dangling)
    for name, spec in descriptor.operations.items():
        _check_operation(name, spec)
    _check_running(descriptor)


def _check_running(descriptor: ToolDescriptor) -> None:
    """Refuse what the operations declare about how they run (:mod:`effectgate.contracts.tools.operation_checks`)."""
    if problem := secrets_problem(descriptor):
        raise PublishRefused("invalid_name", problem)
    for name, spec in descriptor.operations.items():
        if found := operation_problem(descriptor, name, spec):
            raise PublishRefused(*found)


def _check_operation_names(descriptor: ToolDescriptor) -> None:
    """Refuse ``invalid_name`` naming the tool and (up to ten of) its operations outside :data:`OPERATION_NAME`."""
    bad = [name for name in descriptor.operations if not OPERATION_NAME.match(name)]
    if bad:
        shown = ", ".join(repr(name[:64]) for name in bad[:10]) + (
            f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        )
        reason = f"{descriptor.name}: operation names must match {OPERATION_NAME.pattern}; these do not: {shown}"
        raise PublishRefused("invalid_name", reason)


def _check_operation(name: str, spec: OperationSpec) -> None:
    """Check one operation's schemas (:func:`validate_descriptor`'s errors)."""
    for kind, schema in (("input_schema", spec.input_schema), ("output_schema", spec.output_schema)):
        try:
            check_schema(schema)
            if kind == "input_schema":
                secret_arguments(schema)  # a secret marker where it could not be sealed
                file_places(schema)  # a file marker where its content could not be bound
        except SchemaError as error:
            raise PublishRefused("schema_invalid", f"operation {name!r} {kind}: {error}") from None


def check_size(descriptor: ToolDescriptor, limit_bytes: int) -> None:
    """Refuse a descriptor whose JSON is larger than ``limit_bytes`` (what the bus can carry of one).

    Raises:
        PublishRefused: ``descriptor_too_large``, naming the tool, its size and the limit in bytes.
    """
    size = len(msgspec.json.encode(descriptor))
    if size > limit_bytes:
        raise PublishRefused(
            "descriptor_too_large",
            f"{descriptor.name}@{descriptor.version} is {size} bytes as JSON; the bus carries a descriptor of at "
            f"most {limit_bytes} bytes (NATS max_payload less room for the answer): nothing was stored",
        )


def check_lookup(tool: str, version: str | None) -> None:
    """Refuse a lookup of a tool or version that cannot exist (the answer does not repeat it).

    Raises:
        LookupRefused: ``invalid_tool`` (``tool`` does not match :data:`TOOL_NAME`) or
            ``invalid_version`` (``version`` is given and not a semantic version).
    """
    if not TOOL_NAME.match(tool):
        raise LookupRefused("invalid_tool", f"tool must match {TOOL_NAME.pattern}")
    if version is not None and not SEMVER.match(version):
        raise LookupRefused("invalid_version", "version must be a semantic version (SemVer 2.0.0)")
