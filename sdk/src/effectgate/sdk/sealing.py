"""Sealing an agent's secret arguments to the executor before they leave the process."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from nacl.public import PublicKey

from effectgate.contracts.errors import Problem
from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.integrity.sealing import is_envelope, load_sealing_public_key, parse_sealing_public_key, seal
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.secret_arguments import Secret, replace_secrets, secret_arguments

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
    if text := os.environ.get("EFFECTGATE_SEALING_KEY"):
        return parse_sealing_public_key(text)
    directory = os.environ.get("EFFECTGATE_PUBLIC_KEYS_DIR")
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
