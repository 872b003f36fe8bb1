"""Sealed envelopes: secret argument values encrypted to the executor's X25519 key.

A secret value travels as ``{"$sealed": "<base64 ciphertext>"}``; the ciphertext is a libsodium
sealed box (``crypto_box_seal``: an ephemeral X25519 key, XSalsa20-Poly1305, 48 bytes of
overhead; PyNaCl :class:`nacl.public.SealedBox`) of the RFC 8785 canonical JSON of the value.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import msgspec
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from effectgate.contracts.errors import Problem
from effectgate.contracts.integrity.canonical import canonical_bytes, unrepresentable

__all__ = [
    "MAX_SEALED_CHARS",
    "MIN_SEALED_CHARS",
    "SEALED",
    "SEALED_LABEL",
    "SealedInvalid",
    "generate_sealing_keypair",
    "is_envelope",
    "load_sealing_private_key",
    "load_sealing_public_key",
    "parse_sealing_public_key",
    "seal",
    "unseal",
]

SEALED = "$sealed"
"""The one member of a sealed envelope."""
SEALED_LABEL = "«sealed secret»"
"""How a sealed value is shown to people (approval listings): never the ciphertext."""
MAX_SEALED_CHARS = 16_384
"""Longest accepted base64 ciphertext, characters (a secret of about 12 KiB)."""
MIN_SEALED_CHARS = 68
"""Shortest possible base64 ciphertext: 48 bytes of sealed-box overhead and at least one byte of JSON."""
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


class SealedInvalid(Problem, ValueError):
    """A sealed envelope cannot be opened (wrong key, changed bytes) or holds no JSON value."""


def generate_sealing_keypair(directory: Path, name: str = "sealing") -> None:
    """Write ``<name>.key`` (mode 0600) and ``<name>.pub`` (raw X25519, base64) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = PrivateKey.generate()
    private = directory / f"{name}.key"
    private.touch(mode=0o600)
    private.write_text(base64.b64encode(bytes(key)).decode())
    (directory / f"{name}.pub").write_text(base64.b64encode(bytes(key.public_key)).decode())


def _raw_key(text: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except binascii.Error as error:
        raise ValueError(f"a sealing key must be base64: {error}") from None
    if len(raw) != 32:
        raise ValueError(f"a sealing key is 32 bytes, not {len(raw)}")
    return raw


def parse_sealing_public_key(text: str) -> PublicKey:
    """Read a base64 raw X25519 public key. Raises ValueError: not base64 of 32 bytes."""
    return PublicKey(_raw_key(text))


def load_sealing_public_key(path: Path) -> PublicKey:
    """Read ``sealing.pub``. Raises OSError (unreadable) or ValueError (not base64 of 32 bytes)."""
    return parse_sealing_public_key(path.read_text())


def load_sealing_private_key(path: Path) -> PrivateKey:
    """Read ``sealing.key``. Raises OSError (unreadable) or ValueError (not base64 of 32 bytes)."""
    return PrivateKey(_raw_key(path.read_text()))


def seal(value: Any, key: PublicKey) -> dict[str, str]:
    """Return the envelope of ``value`` sealed to ``key`` (randomized: each call differs).

    Raises:
        ValueError: ``value`` has no RFC 8785 canonical form.
    """
    if problem := unrepresentable(value):
        raise ValueError(f"secret value at {problem}")
    ciphertext = SealedBox(key).encrypt(canonical_bytes(value))
    return {SEALED: base64.b64encode(ciphertext).decode()}


def is_envelope(value: Any) -> bool:
    """Whether ``value`` is exactly ``{"$sealed": <base64 string>}`` of an acceptable size."""
    if not isinstance(value, dict) or list(value) != [SEALED] or not isinstance(value[SEALED], str):
        return False
    text: str = value[SEALED]
    return MIN_SEALED_CHARS <= len(text) <= MAX_SEALED_CHARS and len(text) % 4 == 0 and set(text) <= _BASE64


def unseal(envelope: Any, key: PrivateKey) -> Any:
    """Open an envelope and return the JSON value inside.

    Raises:
        SealedInvalid: not an envelope, not sealed to ``key``, changed bytes, or not a
            canonical-representable JSON value inside.
    """
    if not is_envelope(envelope):
        raise SealedInvalid("not a sealed envelope")
    try:
        ciphertext = base64.b64decode(envelope[SEALED], validate=True)
        plaintext = SealedBox(key).decrypt(ciphertext)
        value = msgspec.json.decode(plaintext)
    except (binascii.Error, CryptoError, msgspec.DecodeError):
        raise SealedInvalid("the sealed value cannot be opened with the executor's key") from None
    if unrepresentable(value) is not None:
        raise SealedInvalid("the sealed value has no canonical JSON form")
    return value
