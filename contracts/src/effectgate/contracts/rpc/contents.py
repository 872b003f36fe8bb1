"""Body and answer of ``tg.executor.contents``: what a call's file references name now.

The approvals service asks before it opens an approval; only the executor sees the files
(the sandbox, the MCP servers' file roots), so only it answers, signing the answer with its
receipts key (Ed25519, :mod:`effectgate.contracts.integrity.signing`) bound to the request hash.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.events import BoundRequest
from effectgate.contracts.integrity.signing import verify_event
from effectgate.contracts.tools.contents import ContentState

__all__ = ["ANSWER_MAX_AGE_S", "MAX_QUERY_BYTES", "ContentAnswer", "ContentQuery", "valid_contents"]

ANSWER_MAX_AGE_S: Final = 60.0
"""An answer older (or newer, by clock skew) than this is not accepted, seconds."""

MAX_QUERY_BYTES: Final = 262_144
"""Largest accepted query, bytes (a request is at most 64 KiB; a larger query is refused ``oversized``)."""


class ContentQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What do the file references of this exact call name now?

    Attributes:
        principal: the requesting principal.
        request: the bound request (its arguments hold the references).
        request_hash: its hash (``events.request_hash``); the executor recomputes it.
    """

    principal: str
    request: BoundRequest
    request_hash: str


class ContentAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """The executor's answer to a :class:`ContentQuery`.

    Attributes:
        ok: the references were read (``reason_code`` ``read``); else a refusal
            (``malformed``, ``oversized``, ``hash_mismatch``, ``descriptor_mismatch``,
            ``schema_unusable``) and nothing else is set.
        reason_code: as above.
        reason: human text.
        request_hash: the hash of the request the answer is about.
        contents: one state per reference, in reference order (``()``: the call names no file).
        checked_at: when the executor read them, UTC.
        signature: base64 Ed25519 signature by the executor's receipts key.
    """

    ok: bool
    reason_code: str
    reason: str
    request_hash: str = ""
    contents: tuple[ContentState, ...] = ()
    checked_at: datetime | None = None
    signature: str = ""


def valid_contents(answer: ContentAnswer, query: ContentQuery, key: Ed25519PublicKey, now: datetime) -> bool:
    """Whether ``answer`` is the executor's fresh, signed reading of exactly ``query``'s request."""
    if not answer.ok or answer.checked_at is None or answer.request_hash != query.request_hash:
        return False
    return abs((now - answer.checked_at).total_seconds()) <= ANSWER_MAX_AGE_S and verify_event(answer, key)
