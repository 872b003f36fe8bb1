"""Tool descriptors: the versioned contract of a tool, as stored by the registry.

A descriptor is immutable once published under its ``(name, version)``; its
``digest`` (SHA-256 of the RFC 8785 canonical JSON) is what decisions and
approvals bind to.
"""

from __future__ import annotations

import math
import re
from typing import Any, Protocol

import msgspec

from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass

__all__ = [
    "OPERATION_NAME",
    "SEMVER",
    "TOOL_NAME",
    "DescriptorSource",
    "OperationSpec",
    "RateLimit",
    "RetryPolicy",
    "ToolDescriptor",
    "descriptor_digest",
    "digested",
    "rate_limit_problem",
    "rate_of",
    "semver_key",
]

TOOL_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
"""Tool names are one NATS subject token and one KV key segment."""

OPERATION_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")
"""An operation's name: the characters and length the MCP specification gives a tool name
(2025-11-25, Tools, "Tool names": 1-128 of ``A-Z a-z 0-9 _ - .``)."""

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\Z")
"""Semantic Versioning 2.0.0 §2 and §9 (build metadata is not accepted: ``+`` is no KV key character)."""


class RateLimit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A per-principal rate: ``calls`` per ``period_s`` seconds, burst ``calls``.

    Valid values are checked by :func:`rate_limit_problem` where a rate enters the system
    (registry publish, MCP servers file).
    """

    calls: int
    period_s: float


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the executor retries a call that failed transiently (:mod:`effectgate.contracts.tools.hosting`).

    Applied only to ``READ_ONLY`` operations and to writes declared ``idempotent_at_target``;
    any other write is never retried, whatever it declares (checked at publish).

    Attributes:
        attempts: calls in all, the first included (1 to 10).
        backoff_s: wait before the second call, seconds; doubled for each later one.
        max_backoff_s: longest wait between two calls, seconds.
        on: the error codes a tool's transient fault may carry that are retried (empty: every
            transient fault; a refusal is never retried).
    """

    attempts: int = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    on: tuple[str, ...] = ()


class OperationSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One operation of a tool.

    Attributes:
        input_schema: JSON Schema (draft 2020-12) of the arguments object.
        output_schema: JSON Schema (draft 2020-12) of the result the executor returns.
        side_effect_class: what the operation may change.
        risk_tier: how much harm a misuse can do.
        description: human text shown to agents and approvers.
        rate_limit: this operation's own per-principal rate (its own budget); ``None``:
            the operation shares the tool's ``rate_limit`` (:func:`rate_of`).
        open_world: the call sends data to, or reads from, a party outside the system
            (a web fetch, an external API queried with the caller's parameters); MCP's
            ``openWorldHint``. Policies see it as ``context.open_world``.
        destination: JSON Pointer (RFC 6901) to the argument holding the URL the call
            reaches; its host is ``context.destination_host``.
        amount: JSON Pointer to the argument holding the call's amount of money;
            policies see it as ``context.amount`` (a Cedar ``decimal``).
        cost: what one call costs against a spend budget: a number (a fixed cost), or a
            JSON Pointer to a numeric argument (e.g. ``"/amount"``); ``None``: nothing.
        concurrency_safe: calls may run at the same time; ``False``: the executor runs the
            calls of this tool (of the same ``serialize_by`` value, when given) one at a time.
        serialize_by: JSON Pointer to the argument naming the target a non-concurrent call
            locks (e.g. ``"/account"``); ``None``: the whole tool.
        retry: the retry policy of transient faults (:class:`RetryPolicy`); ``None``: one call.
        idempotent_at_target: a write the target system itself makes idempotent (so a retry
            cannot do it twice); only such writes may declare ``retry``.
        reconcile: the ``READ_ONLY`` operation of the same tool that says whether an
            ``uncertain`` call of this one ran (called with the same arguments).
        streaming: the operation yields items; its result is the array of them.
    """

    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    side_effect_class: SideEffectClass
    risk_tier: RiskTier
    description: str = ""
    rate_limit: RateLimit | None = None
    open_world: bool = False
    destination: str | None = None
    amount: str | None = None
    cost: float | str | None = None
    concurrency_safe: bool = True
    serialize_by: str | None = None
    retry: RetryPolicy | None = None
    idempotent_at_target: bool = False
    reconcile: str | None = None
    streaming: bool = False


class ToolDescriptor(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A versioned tool descriptor.

    Attributes:
        name: tool id matching :data:`TOOL_NAME`.
        version: semantic version matching :data:`SEMVER`.
        adapter: how the executor reaches the tool: ``"file_system"``, ``"mcp:<server>"`` or
            ``"python:<worker>"`` (:mod:`effectgate.contracts.tools.adapters`).
        operations: operation name to its :class:`OperationSpec`.
        timeout_s: wall-clock limit of one call, seconds.
        rate_limit: per-principal rate shared by the operations without their own.
        description: human text.
        secrets: names of the secrets the tool's worker resolves at call time (never their values).
    """

    name: str
    version: str
    adapter: str
    operations: dict[str, OperationSpec]
    timeout_s: float = 30.0
    rate_limit: RateLimit = RateLimit(calls=60, period_s=60.0)
    description: str = ""
    secrets: tuple[str, ...] = ()


LATER_FIELDS: dict[str, Any] = {"secrets": ()}
"""Descriptor fields added after the first release, with their defaults: a default enters no digest."""
LATER_OPERATION_FIELDS: dict[str, Any] = {
    "concurrency_safe": True,
    "serialize_by": None,
    "retry": None,
    "idempotent_at_target": False,
    "reconcile": None,
    "streaming": False,
}
"""Operation fields added after the first release, with their defaults."""


MAX_RATE_CALLS = 1_000_000
"""Largest ``calls`` of a rate."""
MAX_RATE_PERIOD_S = 31_536_000.0
"""Longest ``period_s`` of a rate, seconds (365 days): GCRA times stay exact in microseconds."""


def rate_limit_problem(rate: RateLimit) -> str | None:
    """What is wrong with ``rate``, as ``"<field>: <problem>"``, or ``None`` when it is usable.

    ``calls`` must be an integer from 1 to :data:`MAX_RATE_CALLS`; ``period_s`` a finite
    number of seconds above 0 and at most :data:`MAX_RATE_PERIOD_S`.
    """
    if isinstance(rate.calls, bool) or not 1 <= rate.calls <= MAX_RATE_CALLS:
        return f"calls: must be an integer from 1 to {MAX_RATE_CALLS}, got {rate.calls!r}"
    if not (math.isfinite(rate.period_s) and 0 < rate.period_s <= MAX_RATE_PERIOD_S):
        return f"period_s: must be a number of seconds above 0 and at most {MAX_RATE_PERIOD_S:g}, got {rate.period_s!r}"
    return None


def rate_of(descriptor: ToolDescriptor, operation: str) -> tuple[str, RateLimit]:
    """The rate budget a call of ``operation`` uses: ``(bucket, rate)``.

    Precedence: the operation's own ``rate_limit`` (bucket ``<tool>.<operation>``, a
    budget of its own), else the tool's ``rate_limit`` (bucket ``<tool>``, shared by
    every operation without its own). Tool names hold no ``.``, so the buckets never meet.

    Raises:
        KeyError: the descriptor has no such operation.
    """
    own = descriptor.operations[operation].rate_limit
    if own is not None:
        return f"{descriptor.name}.{operation}", own
    return descriptor.name, descriptor.rate_limit


_digests: dict[tuple[str, str], tuple[ToolDescriptor, str]] = {}


def descriptor_digest(descriptor: ToolDescriptor) -> str:
    """Return ``sha256:<hex>`` of the descriptor's RFC 8785 canonical JSON.

    Remembered for the descriptor object last seen under its ``(name, version)``:
    descriptors are immutable and readers cache them, so each request reuses the digest
    instead of canonicalising every schema again.
    """
    key = (descriptor.name, descriptor.version)
    seen = _digests.get(key)
    if seen is not None and seen[0] is descriptor:
        return seen[1]
    digest = sha256_hex(digested(descriptor))
    _digests[key] = (descriptor, digest)
    return digest


def digested(descriptor: ToolDescriptor) -> dict[str, Any]:
    """What a descriptor's digest covers: its builtins without the later fields left at their defaults.

    So a descriptor published before those fields existed keeps its digest (and its signature).
    """
    body: dict[str, Any] = msgspec.to_builtins(descriptor)
    _drop_defaults(body, LATER_FIELDS)
    for operation in body["operations"].values():
        _drop_defaults(operation, LATER_OPERATION_FIELDS)
    return body


def _drop_defaults(body: dict[str, Any], defaults: dict[str, Any]) -> None:
    for name, default in defaults.items():
        if name in body and body[name] == (list(default) if isinstance(default, tuple) else default):
            del body[name]


def semver_key(version: str) -> tuple[int, int, int, int, str]:
    """Sort key giving SemVer 2.0.0 §11 precedence (pre-releases sort below releases).

    Raises:
        ValueError: ``version`` is not a semantic version.
    """
    match = SEMVER.match(version)
    if match is None:
        raise ValueError(f"not a semantic version: {version!r}")
    major, minor, patch, pre = match.groups()
    return (int(major), int(minor), int(patch), 0 if pre else 1, pre or "")


class DescriptorSource(Protocol):
    """Reads published tool descriptors (the registry's KV bucket, ``shared.stores.tools_kv.ToolsBucket``)."""

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return ``tool`` at ``version`` (``None``: the latest version), or None when unknown."""
        ...

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        ...
