"""Ed25519 signatures over events (RFC 8032), with ``cryptography``.

The signed bytes are the RFC 8785 canonical JSON of the event with its
``signature`` field removed. Keys are stored as raw 32-byte values, base64 encoded,
one per file: ``<name>.key`` (private) and ``<name>.pub`` (public).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectgate.contracts.integrity.canonical import canonical_bytes

__all__ = [
    "generate_keypair",
    "load_private_key",
    "load_public_key",
    "sign_event",
    "sign_value",
    "signed_by",
    "signed_bytes",
    "verify_body",
    "verify_event",
    "verify_value",
]

E = TypeVar("E", bound=msgspec.Struct)


def signed_bytes(event: msgspec.Struct) -> bytes:
    """Return the bytes a signature covers: canonical JSON without ``signature``."""
    body: dict[str, Any] = msgspec.to_builtins(event)
    body.pop("signature", None)
    return canonical_bytes(body)


def sign_event(event: E, key: Ed25519PrivateKey) -> E:
    """Return a copy of ``event`` whose ``signature`` field holds the base64 signature."""
    signature = base64.b64encode(key.sign(signed_bytes(event))).decode()
    return msgspec.structs.replace(event, signature=signature)


def verify_event(event: msgspec.Struct, key: Ed25519PublicKey) -> bool:
    """Return whether the event's ``signature`` is valid under ``key``; never raises."""
    return verify_body(msgspec.to_builtins(event), key)


def verify_body(body: dict[str, Any], key: Ed25519PublicKey) -> bool:
    """Whether ``body`` (an event as decoded from its wire JSON) carries a valid signature under ``key``.

    Checks exactly the fields that were sent, so an event signed by a newer or older
    version of the signer still verifies. Never raises.
    """
    unsigned = {name: value for name, value in body.items() if name != "signature"}
    return verify_value(unsigned, str(body.get("signature") or ""), key)


def signed_by(data: bytes | None, key: Ed25519PublicKey) -> bool:
    """Whether the raw event ``data`` (wire JSON) carries a valid signature under ``key`` (over the fields sent).

    ``False`` for bytes that are no JSON object. Never raises.
    """
    try:
        body = msgspec.json.decode(data or b"")
    except msgspec.DecodeError:
        return False
    return isinstance(body, dict) and verify_body(body, key)


def sign_value(value: Any, key: Ed25519PrivateKey) -> str:
    """The base64 Ed25519 signature of the RFC 8785 canonical JSON of ``value`` (a detached signature).

    Raises:
        rfc8785.CanonicalizationError: ``value`` has no canonical JSON form.
    """
    return base64.b64encode(key.sign(canonical_bytes(value))).decode()


def verify_value(value: Any, signature: str, key: Ed25519PublicKey) -> bool:
    """Whether ``signature`` (base64) is ``key``'s signature of the canonical JSON of ``value``; never raises."""
    try:
        key.verify(base64.b64decode(signature, validate=True), canonical_bytes(value))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def generate_keypair(directory: Path, name: str) -> None:
    """Write ``<name>.key`` (mode 0600) and ``<name>.pub`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.key"
    private.touch(mode=0o600)
    private.write_text(base64.b64encode(key.private_bytes_raw()).decode())
    public = key.public_key().public_bytes_raw()
    (directory / f"{name}.pub").write_text(base64.b64encode(public).decode())


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Read a base64 raw Ed25519 private key.

    Raises:
        OSError: the file cannot be read.
        ValueError: the content is not a base64 32-byte key.
    """
    raw = base64.b64decode(path.read_text().strip(), validate=True)
    return Ed25519PrivateKey.from_private_bytes(raw)


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read a base64 raw Ed25519 public key.

    Raises:
        OSError: the file cannot be read.
        ValueError: the content is not a base64 32-byte key.
    """
    raw = base64.b64decode(path.read_text().strip(), validate=True)
    return Ed25519PublicKey.from_public_bytes(raw)
