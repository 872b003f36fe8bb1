"""Sealing an agent's secret arguments to the executor before they leave the process.

A secret argument (``writeOnly: true`` or ``x-toolgate-secret: true`` in the operation's
input schema, :mod:`toolgate.contracts.secret_arguments`) is replaced by
``{"$sealed": "<base64 sealed box of its RFC 8785 canonical JSON>"}``, sealed to the
executor's X25519 public key (``sealing.pub``): the bus, the policy, the approvals, the
audit and the logs only ever see that envelope, and the approval binds its exact bytes.

Sealing is randomized; a retry with the same idempotency key and the same plaintext in
one :class:`Sealer` reuses the first envelope, so it replays instead of being refused as
"same key, other arguments". The key is found, first match wins: an explicit key, the
``sealing.pub`` of the ``public_keys`` directory, ``$TOOLGATE_SEALING_KEY`` (base64),
``$TOOLGATE_PUBLIC_KEYS_DIR/sealing.pub``.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from nacl.public import PublicKey

from toolgate.contracts.canonical import sha256_hex
from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.contracts.errors import Problem
from toolgate.contracts.sealing import is_envelope, load_sealing_public_key, parse_sealing_public_key, seal
from toolgate.contracts.secret_arguments import Secret, replace_secrets, secret_arguments

__all__ = ["SealingKeyMissing", "Sealer", "find_sealing_key"]

CACHE_ENTRIES = 1024
"""Envelopes kept for retries, per client (least recently used dropped first)."""


class SealingKeyMissing(Problem):
    """An operation has secret arguments and no sealing key is configured: nothing was sent."""


def find_sealing_key(public_keys: Path | None = None, key: str | PublicKey | None = None) -> PublicKey | None:
    """The executor's sealing public key (module docstring for the order), or ``None``.

    Raises:
        OSError / ValueError: a named key or ``sealing.pub`` is unreadable or not base64 of 32 bytes.
    """
    if isinstance(key, PublicKey):
        return key
    if key is not None:
        return parse_sealing_public_key(key)
    if public_keys is not None and (public_keys / "sealing.pub").exists():
        return load_sealing_public_key(public_keys / "sealing.pub")
    if text := os.environ.get("TOOLGATE_SEALING_KEY"):
        return parse_sealing_public_key(text)
    directory = os.environ.get("TOOLGATE_PUBLIC_KEYS_DIR")
    if directory and (Path(directory) / "sealing.pub").exists():
        return load_sealing_public_key(Path(directory) / "sealing.pub")
    return None


class Sealer:
    """Seals the secret arguments of calls; remembers envelopes of calls with a chosen idempotency key."""

    def __init__(self, key: PublicKey | None) -> None:
        self.key = key
        self._kept: OrderedDict[tuple[str, ...], dict[str, str]] = OrderedDict()

    def seal_arguments(
        self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any], idempotency_key: str | None
    ) -> dict[str, Any]:
        """``arguments`` with each secret value sealed (an envelope given by the caller is kept).

        Raises:
            SealingKeyMissing: the operation has a secret argument and there is no key.
            SchemaUnusable: the input schema marks a secret where it cannot be sealed.
            ValueError: a secret value has no canonical JSON form.
        """
        spec = descriptor.operations.get(operation)
        secrets = secret_arguments(spec.input_schema) if spec is not None else ()
        if not secrets:
            return arguments
        if self.key is None:
            where = ", ".join(secret.pointer for secret in secrets)
            raise SealingKeyMissing(f"{descriptor.name}.{operation} has secret arguments ({where}): no sealing key")
        scope = (descriptor.name, operation, idempotency_key) if idempotency_key is not None else None
        return replace_secrets(arguments, secrets, lambda secret, value: self._seal(secret, value, scope))

    def _seal(self, secret: Secret, value: Any, scope: tuple[str, str, str] | None) -> Any:
        assert self.key is not None
        if is_envelope(value):
            return value
        if scope is None:
            return seal(value, self.key)
        kept = (*scope, secret.pointer, sha256_hex(value))
        if kept not in self._kept:
            self._kept[kept] = seal(value, self.key)
            while len(self._kept) > CACHE_ENTRIES:
                self._kept.popitem(last=False)
        self._kept.move_to_end(kept)
        return self._kept[kept]
