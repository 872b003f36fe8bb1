"""The Slack endpoint's edge: what a request must pass before Bolt parses and dispatches it."""

from __future__ import annotations

import hashlib
import heapq
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import StreamReader
from aiohttp.http_exceptions import HttpProcessingError
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from effectgate.chatops.errors import RequestRefused

__all__ = [
    "DRAIN_BYTES",
    "MAX_BODY_BYTES",
    "STALE_AFTER_S",
    "Body",
    "SeenRequests",
    "ServerLog",
    "bolt_request",
    "check_fresh",
    "read_body",
    "signed_at",
]

MAX_BODY_BYTES = 1024**2
"""Largest body the endpoint accepts, bytes (Slack's interaction payloads are far smaller)."""

DRAIN_BYTES = 8 * MAX_BODY_BYTES
"""Bytes of an oversized body read (and hashed) at most before it is refused."""

STALE_AFTER_S = 60 * 5
"""A request whose timestamp is further off now than this is refused (Slack's rule), seconds."""

KEEP_MARGIN_S = 60
"""A remembered signature is kept this long past the window, seconds (clock steps, slow requests)."""

MAX_REMEMBERED = 10_000
"""Signatures remembered at most; beyond this new requests are refused (fail closed)."""

MALFORMED = "slack_request_malformed"
TIMESTAMP, SIGNATURE, RETRY = "X-Slack-Request-Timestamp", "X-Slack-Signature", "X-Slack-Retry-Num"


@dataclass(frozen=True)
class Body:
    """A request's body as read.

    Attributes:
        data: the body (at most :data:`MAX_BODY_BYTES`: a bigger one is refused).
        size_bytes: bytes read.
        digest: ``sha256:<hex>`` of the whole body; ``None`` when reading stopped before its end.
    """

    data: bytes
    size_bytes: int
    digest: str | None


async def read_body(stream: StreamReader, max_bytes: int = MAX_BODY_BYTES, drain_bytes: int = DRAIN_BYTES) -> Body:
    """Read and hash a body, keeping at most ``max_bytes`` of it and reading at most ``drain_bytes``.

    Raises:
        RequestRefused: 413 when the body is over ``max_bytes``.
    """
    hasher, kept, size = hashlib.sha256(), bytearray(), 0
    async for chunk in stream.iter_any():
        hasher.update(chunk)
        size += len(chunk)
        if size <= max_bytes:
            kept += chunk
        elif size > drain_bytes:
            raise _oversized(size, None, max_bytes)
    if size > max_bytes:
        raise _oversized(size, "sha256:" + hasher.hexdigest(), max_bytes)
    return Body(bytes(kept), size, "sha256:" + hasher.hexdigest())


def _oversized(size_bytes: int, digest: str | None, max_bytes: int) -> RequestRefused:
    read = f"{size_bytes} bytes" if digest else f"over {size_bytes} bytes"
    why = f"with a body of {read} (the limit is {max_bytes})"
    return RequestRefused(413, "slack_request_oversized", why, f"request body over {max_bytes} bytes", digest)


def signed_at(verifier: SignatureVerifier, headers: Mapping[str, str], body: Body, now: float) -> int:
    """The request's timestamp, Unix seconds, when Slack signed it within :data:`STALE_AFTER_S` of ``now``.

    Raises:
        RequestRefused: 401 for a missing, wrong or stale signature; 400 for one that cannot be checked.
    """
    stamp, signature = headers.get(TIMESTAMP), headers.get(SIGNATURE)
    if stamp is None or signature is None:
        raise RequestRefused(401, "slack_signature_invalid", "with no signature", "invalid request", body.digest)
    unreadable = _unreadable(stamp, signature, body.data)
    if unreadable:
        raise RequestRefused(400, MALFORMED, f"with {unreadable}", f"malformed request: {unreadable}", body.digest)
    seconds = int(stamp)
    if abs(now - seconds) > STALE_AFTER_S:
        why = "with a timestamp over 5 minutes off (a replay?)"
        raise RequestRefused(401, "slack_signature_stale", why, "invalid request", body.digest)
    if not verifier.is_valid(body.data, stamp, signature):
        raise RequestRefused(401, "slack_signature_invalid", "with no valid signature", "invalid request", body.digest)
    return seconds


def _unreadable(stamp: str, signature: str, data: bytes) -> str:
    """What makes the signature impossible to check, or ``""``."""
    if not (stamp.isascii() and stamp.strip().isdigit() and len(stamp) <= 20):
        return f"an {TIMESTAMP} that is not Unix seconds"
    if not signature.isascii():
        return f"an {SIGNATURE} that is not ASCII"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "a body that is not UTF-8"
    return ""


class SeenRequests:
    """Signatures of accepted requests, each kept until its timestamp is out of the window.

    Args:
        keep_s: how long past its timestamp a signature is kept, seconds.
        max_entries: signatures kept at most.
        clock: Unix seconds now (injected for tests).
    """

    def __init__(
        self,
        keep_s: float = STALE_AFTER_S + KEEP_MARGIN_S,
        max_entries: int = MAX_REMEMBERED,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keep_s, self._max, self._clock = keep_s, max_entries, clock
        self._started_at = clock()
        self._expiry: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._expiry)

    def remember(self, signature: str, timestamp: int) -> Literal["new", "seen", "before", "full"]:
        """Remember ``signature`` (of a request signed at ``timestamp``, Unix seconds).

        Returns:
            ``new``; ``seen`` (remembered already: a replay); ``before`` (signed before this
            memory began, e.g. before a restart: it cannot be told from a replay); or
            ``full`` (not remembered: too many).
        """
        self._expire()
        if signature in self._expiry:
            return "seen"
        if timestamp < self._started_at - 1:
            return "before"
        if len(self._expiry) >= self._max:
            return "full"
        expires = timestamp + self._keep_s
        self._expiry[signature] = expires
        heapq.heappush(self._heap, (expires, signature))
        return "new"

    def _expire(self) -> None:
        now = self._clock()
        while self._heap and self._heap[0][0] < now:
            _, signature = heapq.heappop(self._heap)
            del self._expiry[signature]


def check_fresh(seen: SeenRequests, headers: Mapping[str, str], timestamp: int, body: Body) -> None:
    """Pass a request seen for the first time that is not Slack's retry.

    Raises:
        RequestRefused: 200 for a replay or a retry (no effect), 503 when no more can be remembered.
    """
    verdict = seen.remember(headers[SIGNATURE], timestamp)
    if verdict == "full":
        why = f"that cannot be remembered ({len(seen)} signatures in the window: a leaked signing secret?)"
        raise RequestRefused(503, "slack_replay_memory_full", why, "busy: try again later", body.digest)
    if verdict == "seen":
        why = "that was accepted before (a replay of a captured request)"
        raise RequestRefused(200, "slack_request_replayed", why, "", body.digest)
    if verdict == "before":
        why = "signed before the bot started (it cannot be told from a replay); the approver answers again"
        raise RequestRefused(
            200, "slack_request_before_start", why, "signed before a restart: answer again", body.digest
        )
    if RETRY in headers:
        why = f"that is Slack's retry ({RETRY}) of a request already delivered"
        raise RequestRefused(200, "slack_request_replayed", why, "", body.digest)


_SHAPE_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError)
"""What Bolt's parser raises for a body that is not of Slack's shape (``JSONDecodeError`` is a ``ValueError``)."""


_NOT_AN_OBJECT = "the payload is not a JSON object of Slack's shape"


def bolt_request(body: Body, query: str, headers: Mapping[str, str]) -> AsyncBoltRequest:
    """Bolt's request for a checked body.

    Raises:
        RequestRefused: 400 when Bolt cannot parse it, or what it parses to is not a JSON object.
    """
    try:
        parsed = AsyncBoltRequest(body=body.data.decode("utf-8"), query=query, headers=dict(headers))
    except _SHAPE_ERRORS as error:
        why = "the body or its payload is not JSON" if isinstance(error, ValueError) else _NOT_AN_OBJECT
        raise RequestRefused(400, MALFORMED, f"where {why}", f"malformed request: {why}", body.digest) from error
    if not isinstance(parsed.body, dict):
        why = _NOT_AN_OBJECT
        raise RequestRefused(400, MALFORMED, f"where {why}", f"malformed request: {why}", body.digest)
    return parsed


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger for the endpoint (``logger=`` of its runner).

    A request whose head aiohttp cannot read (a header line over 8190 bytes, bytes that are not
    HTTP) is answered 400 by aiohttp itself, before any handler, and logged with a traceback.
    Here it is handed to ``unreadable(remote, error)`` instead (one line and a report); any other
    error keeps its traceback.

    Args:
        unreadable: called with the client's address (``None`` when unknown) and aiohttp's error.
    """

    def __init__(self, unreadable: Callable[[str | None, HttpProcessingError], None]) -> None:
        super().__init__(logging.getLogger("effectgate.chatops.slack.http"))
        self._unreadable = unreadable

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        """Log ``msg`` with its traceback, unless ``exc_info`` is a request aiohttp could not read."""
        if isinstance(exc_info, HttpProcessingError):
            remote = args[0] if args and isinstance(args[0], str) else None
            self._unreadable(remote, exc_info)
            return
        super().exception(msg, *args, exc_info=exc_info, **kwargs)
