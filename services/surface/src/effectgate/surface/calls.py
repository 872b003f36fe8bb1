"""Which governed request an MCP ``tools/call`` belongs to: the retry rule."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import msgspec

from effectgate.contracts.integrity.canonical import canonical_bytes

__all__ = ["CLIENT_KEY", "CallEntry", "arguments_digest", "call_key", "fresh_entry", "reusable", "settled"]

CLIENT_KEY = "io.effectgate/idempotency-key"
"""The ``_meta`` field a client names a call with (module docstring)."""

CLIENT_KEY_CHARS = 200

_NO_EFFECT = frozenset({"denied", "refused", "expired", "withdrawn"})


class CallEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One call as the ledger holds it.

    Attributes:
        request_id: the governed request's id.
        idempotency_key: the key it was sent with.
        read_only: the operation is ``READ_ONLY``.
        settled_at: when its outcome was returned to a client (Unix seconds), else ``None``.
        keep: the outcome may have had an effect: re-sends get it until ``grace_s`` after ``settled_at``.
        arguments_digest: SHA-256 of the MCP name and canonical arguments: a client key used again for
            another tool or with other arguments is refused (the executor refuses a reused idempotency key).
        published: the request is in the stream (a re-send of an entry that is not publishes it again:
            the replica that wrote it may have died first; the stream drops a second copy by its id).
    """

    request_id: str
    idempotency_key: str
    read_only: bool
    settled_at: float | None = None
    keep: bool = True
    published: bool = False
    arguments_digest: str = ""


def call_key(principal: str, name: str, arguments: dict[str, Any], client_key: str | None) -> str:
    """The ledger key of a call: ``<principal>.<32 hex>`` (a NATS KV key).

    Raises:
        ValueError: ``client_key`` is empty or longer than 200 characters; an argument has
            no canonical JSON form (RFC 8785).
    """
    if client_key is not None:
        if not 0 < len(client_key) <= CLIENT_KEY_CHARS:
            raise ValueError(f"_meta[{CLIENT_KEY!r}] must be 1-{CLIENT_KEY_CHARS} characters")
        identity = b"key\0" + client_key.encode()
    else:
        identity = b"call\0" + name.encode() + b"\0" + canonical_bytes(arguments)
    return f"{principal}.{hashlib.sha256(identity).hexdigest()[:32]}"


def arguments_digest(name: str, arguments: dict[str, Any]) -> str:
    """SHA-256 of the MCP tool name and the canonical arguments (RFC 8785), hex: what a client key is bound to.

    Raises:
        ValueError: an argument has no canonical JSON form.
    """
    return hashlib.sha256(name.encode() + b"\0" + canonical_bytes(arguments)).hexdigest()


def fresh_entry(key: str, read_only: bool, client_key: str | None, digest: str) -> CallEntry:
    """A new call: a new request id, and the idempotency key the executor dedupes on.

    A client's key is the call's idempotency key (digested with the ledger key, so it stays
    within the executor's limits); without one, each new call gets a key of its own.
    """
    request_id = uuid.uuid4().hex
    basis = key if client_key is not None else f"{key}.{request_id}"
    idempotency_key = "mcp-" + hashlib.sha256(basis.encode()).hexdigest()[:40]
    return CallEntry(
        request_id=request_id, idempotency_key=idempotency_key, read_only=read_only, arguments_digest=digest
    )


def reusable(entry: CallEntry, now: float, grace_s: float, client_key: bool) -> bool:
    """Whether a new ``tools/call`` is a re-send of ``entry`` (module docstring)."""
    if client_key or entry.settled_at is None:
        return True
    return entry.keep and now - entry.settled_at < grace_s


def settled(entry: CallEntry, outcome: str, reason_code: str, now: float) -> CallEntry:
    """``entry`` once its outcome was returned: kept for re-sends only if it may have had an effect."""
    no_effect = outcome in _NO_EFFECT or reason_code in _NO_EFFECT
    return msgspec.structs.replace(entry, settled_at=now, keep=not (entry.read_only or no_effect))
