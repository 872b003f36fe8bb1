"""NATS JWTs (nats-io/jwt v2): standard JWTs signed with the issuer's nkey, through PyJWT.

The header is ``{"alg":"ed25519-nkey","typ":"JWT"}`` and the signature Ed25519 over
``<header>.<payload>`` (RFC 7515 compact form) by the issuer's nkey; ``iss`` is that nkey's
public key and ``jti`` the unpadded base32 SHA-512/256 of the claims without it (nats-io/jwt
``v2/claims.go``, ``v2/header.go``). Keys are nkeys seeds (``S…``, bytes) and public keys
(``O…`` operator, ``A…`` account, ``U…`` user) from the ``nkeys`` package. A user's
credentials file is the user JWT and its seed, decorated as ``nsc`` writes it (``v2/creds_utils.go``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any, Literal, NoReturn

import nkeys
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jwt import PyJWS
from jwt.algorithms import Algorithm
from jwt.exceptions import PyJWTError

from effectgate.contracts.errors import Problem

__all__ = [
    "ALGORITHM",
    "Claims",
    "JwtInvalid",
    "KEY_PREFIXES",
    "KeyKind",
    "creds_text",
    "decode",
    "new_seed",
    "public_key",
    "seed_kind",
    "sign",
    "unverified",
]

ALGORITHM = "ed25519-nkey"
"""The ``alg`` of every NATS JWT."""

Claims = dict[str, Any]
"""A JWT's claims: ``iss``, ``sub``, ``iat``, ``jti``, ``name`` and the ``nats`` section."""

KeyKind = Literal["operator", "account", "user"]

KEY_PREFIXES: dict[KeyKind, int] = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
}
"""The nkeys prefix byte of each kind of key (its public key starts ``O``, ``A`` or ``U``)."""


class JwtInvalid(Problem, ValueError):
    """A JWT or a key cannot be read, or its signature is not its claimed issuer's; the message says which."""


def new_seed(kind: KeyKind) -> bytes:
    """A fresh nkeys seed of ``kind`` (32 random bytes from ``os.urandom``), e.g. ``b"SO…"``."""
    return bytes(nkeys.encode_seed(os.urandom(32), KEY_PREFIXES[kind]))


def public_key(seed: bytes) -> str:
    """The public key of ``seed`` (``O…``, ``A…``, ``U…``).

    Raises:
        JwtInvalid: ``seed`` is not an nkeys seed.
    """
    try:
        return str(nkeys.from_seed(bytearray(seed.strip())).public_key.decode())
    except (nkeys.NkeysError, ValueError) as error:
        raise JwtInvalid(f"not an nkeys seed ({type(error).__name__})") from None


def seed_kind(seed: bytes) -> KeyKind | None:
    """Which kind of key ``seed`` is, or ``None`` when it is no operator, account or user seed."""
    try:
        prefix, _ = nkeys.decode_seed(bytearray(seed.strip()))
    except (nkeys.NkeysError, ValueError):
        return None
    return next((kind for kind, byte in KEY_PREFIXES.items() if byte == prefix), None)


def _raw_public(key: str) -> bytes:
    """The 32 Ed25519 bytes of a public nkey (base32 of prefix byte, key, CRC-16 little endian)."""
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except ValueError:
        raise JwtInvalid(f"not a public nkey: {key[:8]}…") from None
    if len(raw) != 35 or bytes(nkeys.crc16_checksum(raw[:-2])) != raw[-2:]:
        raise JwtInvalid(f"not a public nkey: {key[:8]}…")
    return raw[1:-2]


class _Nkey(Algorithm):
    """``ed25519-nkey`` for PyJWT: signs with a seed (bytes), verifies with a public key (str)."""

    def prepare_key(self, key: Any) -> Any:
        return nkeys.from_seed(bytearray(key)) if isinstance(key, bytes) else _raw_public(str(key))

    def sign(self, msg: bytes, key: Any) -> bytes:
        return bytes(key.sign(msg))

    def verify(self, msg: bytes, key: Any, sig: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(sig, msg)
        except InvalidSignature:
            return False
        return True

    @staticmethod
    def to_jwk(key_obj: Any, as_dict: bool = False) -> NoReturn:
        raise NotImplementedError("nkeys have no JWK form")

    @staticmethod
    def from_jwk(jwk: Any) -> NoReturn:
        raise NotImplementedError("nkeys have no JWK form")


_JWS = PyJWS(algorithms=[])
_JWS.register_algorithm(ALGORITHM, _Nkey())


def _jti(claims: Claims) -> str:
    body = json.dumps({k: v for k, v in claims.items() if k != "jti"}, separators=(",", ":"), sort_keys=True)
    return base64.b32encode(hashlib.new("sha512_256", body.encode()).digest()).decode().rstrip("=")


def sign(claims: Claims, seed: bytes) -> str:
    """``claims`` as a NATS JWT issued by ``seed``: ``iss`` set to its public key, ``jti`` computed.

    Raises:
        JwtInvalid: ``seed`` is not an nkeys seed.
    """
    issued = {**claims, "iss": public_key(seed)}
    issued["jti"] = _jti(issued)
    payload = json.dumps(issued, separators=(",", ":")).encode()
    return _JWS.encode(payload, seed.strip(), algorithm=ALGORITHM, headers={"typ": "JWT"})


def decode(token: str, issuer: str) -> Claims:
    """The claims of ``token``, once its signature is checked to be ``issuer``'s (a public nkey).

    Raises:
        JwtInvalid: not a NATS JWT, not signed by ``issuer``, or its ``iss`` is another key.
    """
    try:
        claims: Claims = json.loads(_JWS.decode_complete(token, issuer, algorithms=[ALGORITHM])["payload"])
    except (PyJWTError, ValueError) as error:
        raise JwtInvalid(f"JWT not valid for issuer {issuer[:8]}…: {error}") from None
    if claims.get("iss") != issuer:
        raise JwtInvalid(f"JWT names issuer {str(claims.get('iss'))[:8]}…, not {issuer[:8]}…")
    return claims


def unverified(token: str) -> Claims:
    """The claims of ``token`` without checking its signature (to learn who issued it, then :func:`decode`).

    Raises:
        JwtInvalid: not a JWT.
    """
    try:
        claims = json.loads(_JWS.decode_complete(token, options={"verify_signature": False})["payload"])
    except (PyJWTError, ValueError) as error:
        raise JwtInvalid(f"not a JWT: {error}") from None
    if not isinstance(claims, dict):
        raise JwtInvalid("a JWT's claims must be an object")
    return claims


def creds_text(user_jwt: str, seed: bytes) -> str:
    """A credentials file (``nats.connect(user_credentials=…)``): the user JWT, then its seed, as ``nsc`` writes."""
    return (
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{seed.strip().decode()}\n------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )
