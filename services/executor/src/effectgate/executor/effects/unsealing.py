"""Opening sealed secret arguments at the moment of effect, and keeping them out of receipts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nacl.public import PrivateKey

from effectgate.contracts.integrity.sealing import SEALED_LABEL, SealedInvalid, unseal
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.schemas import SchemaError, first_error_pointer
from effectgate.contracts.tools.secret_arguments import Secret, replace_secrets, secret_arguments
from effectgate.executor.errors import ToolRefused

__all__ = ["MIN_REDACTED_CHARS", "Opened", "Unsealer", "redact"]

MIN_REDACTED_CHARS = 4
"""Shorter secret strings are not searched for in results (they would mask ordinary text)."""


@dataclass(frozen=True)
class Opened:
    """Arguments ready for the tool, and the plaintext strings that must not leave the executor."""

    arguments: dict[str, Any]
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class Unsealer:
    """Opens sealed arguments with ``key`` (``None``: the executor holds no sealing key)."""

    key: PrivateKey | None

    def open(self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any]) -> Opened:
        """Return the plaintext arguments of one call.

        Raises:
            ToolRefused: ``sealed_argument_invalid``, naming the pointer (module docstring), or
                ``schema_unusable`` for an input schema with a secret where none can be.
        """
        schema = descriptor.operations[operation].input_schema
        try:
            secrets = secret_arguments(schema)
            if not secrets:
                return Opened(arguments, ())
            plain: list[Any] = []
            opened = replace_secrets(arguments, secrets, lambda secret, value: self._open(secret, value, plain))
            where = first_error_pointer(schema, opened)
        except SchemaError as error:  # the policy denies such a schema; never run on one
            raise ToolRefused("schema_unusable", f"{descriptor.name}.{operation}: {error}") from None
        if where is not None:
            reason = f"the arguments opened from their sealed envelopes are invalid at {where}"
            raise ToolRefused("sealed_argument_invalid", reason)
        return Opened(opened, tuple(_strings(plain)))

    def _open(self, secret: Secret, envelope: Any, plain: list[Any]) -> Any:
        if self.key is None:
            raise ToolRefused("sealed_argument_invalid", f"{secret.pointer}: the executor holds no sealing key")
        try:
            value = unseal(envelope, self.key)
        except SealedInvalid as error:
            raise ToolRefused("sealed_argument_invalid", f"{secret.pointer}: {error}") from None
        plain.append(value)
        return value


def _strings(values: list[Any]) -> list[str]:
    """Every string of at least :data:`MIN_REDACTED_CHARS` inside ``values`` (longest first)."""
    found: list[str] = []
    pending = list(values)
    while pending:
        value = pending.pop()
        if isinstance(value, str) and len(value) >= MIN_REDACTED_CHARS:
            found.append(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return sorted(set(found), key=len, reverse=True)


def redact(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every occurrence of a secret string replaced by :data:`SEALED_LABEL`.

    A tool that echoes a secret argument (in its result or its error text) does not put
    it into the receipt.
    """
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, SEALED_LABEL)
        return value
    if isinstance(value, dict):
        return {redact(key, secrets): redact(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, secrets) for item in value]
    return value
