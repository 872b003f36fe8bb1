"""Where idempotency records live in Redis, shared by the executor (owner) and policy (reader).

A record is a Redis hash at :func:`record_key` with fields ``state`` (``inflight`` or
``done``), ``fp`` (the request hash the key was first used with), ``owner`` (request id),
``claimed_at_ms`` and, once done, ``receipt`` (the receipt JSON). The raw idempotency key
never appears in a Redis key name: it is hashed (it may carry anything the agent chose).
"""

from __future__ import annotations

import hashlib

__all__ = ["EPOCH_KEY", "key_digest", "record_key"]

EPOCH_KEY = "tg:epoch:idem"
"""Set once the index is complete (after a rebuild from the stream); absent means Redis lost it."""


def key_digest(idempotency_key: str) -> str:
    """SHA-256 hex of the idempotency key: how the key appears in Redis keys and claim subjects."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


def record_key(principal: str, idempotency_key: str) -> str:
    """``tg:idem:{<principal>}:<sha256 hex of the key>``; the hash tag keeps a principal on one cluster slot."""
    return f"tg:idem:{{{principal}}}:{key_digest(idempotency_key)}"
