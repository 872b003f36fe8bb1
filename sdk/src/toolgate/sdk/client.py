"""``ToolClient``: how an agent calls tools through toolgate.

The agent's principal is the token of the subject it publishes on
(``tg.req.<principal>``); with NATS permissions it can publish nowhere else, so the
principal is proven by the transport, not claimed in the body. Receipts arrive on
``tg.receipt.<principal>.<request_id>``; the client subscribes before it publishes,
so no receipt is missed, including one that arrives after a long pending approval.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg

from toolgate.shared import catalog
from toolgate.shared.bus import fetch_last, publish_event
from toolgate.shared.canonical import unrepresentable
from toolgate.shared.catalog import TOKEN, Rpc, Subjects
from toolgate.shared.descriptors import ToolDescriptor
from toolgate.shared.events import ReceiptIssued, ResultRef, ToolRequested, decode_untrusted

__all__ = ["DuplicateRequest", "RegistryUnavailable", "ResultUnavailable", "ToolClient"]

_receipt = msgspec.json.Decoder(ReceiptIssued)


log = logging.getLogger("toolgate.sdk")


async def _log_error(error: Exception) -> None:
    log.warning("NATS connection: %s", error or type(error).__name__)


class DuplicateRequest(Exception):
    """The stream already held a message with this request id: nothing new was submitted."""


class RegistryUnavailable(Exception):
    """The registry did not answer or refused the lookup."""


class ResultUnavailable(Exception):
    """A result kept out of band could not be read back (expired, missing or corrupted)."""


class _Listing(msgspec.Struct):
    ok: bool
    reason: str
    descriptors: list[ToolDescriptor] | None = None
    descriptor: ToolDescriptor | None = None


class ToolClient:
    """An agent's connection to toolgate.

    Use ``async with await ToolClient.connect(url, principal) as client``.
    """

    def __init__(self, nc: Client, principal: str) -> None:
        if not TOKEN.match(principal):
            raise ValueError(f"principal {principal!r} must match {TOKEN.pattern}")
        self._nc, self.principal = nc, principal
        self._js = nc.jetstream()
        self._waiting: dict[str, asyncio.Future[ReceiptIssued]] = {}
        self._arrived: dict[str, ReceiptIssued] = {}
        self._subscription: Any = None

    @classmethod
    async def connect(cls, url: str, principal: str, **options: Any) -> ToolClient:
        """Connect as ``principal``; ``options`` go to ``nats.connect`` (credentials, inbox_prefix, …).

        Defaults: 5 s connect timeout, then up to 30 attempts one second apart (for the first
        connection and for each reconnection), each failure logged as one warning line.

        Raises:
            nats.errors.NoServersError: the server could not be reached.
        """
        defaults: dict[str, Any] = {
            "connect_timeout": 5.0,
            "max_reconnect_attempts": 30,
            "reconnect_time_wait": 1.0,
            "error_cb": _log_error,
        }
        client = cls(await nats.connect(url, **{**defaults, **options}), principal)
        await client.start()
        return client

    async def start(self) -> None:
        """Subscribe to this principal's receipts."""
        self._subscription = await self._nc.subscribe(Subjects.receipts_of(self.principal), cb=self._on_receipt)

    async def _on_receipt(self, msg: Msg) -> None:
        try:
            issued = decode_untrusted(_receipt, msg.data)
        except msgspec.DecodeError:
            return
        future = self._waiting.pop(issued.request_id, None)
        if future is not None and not future.done():
            future.set_result(issued)
        elif future is None:
            self._arrived[issued.request_id] = issued

    async def close(self) -> None:
        """Drain the connection."""
        await self._nc.drain()

    async def __aenter__(self) -> ToolClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def list_tools(self, timeout_s: float = 5.0) -> list[ToolDescriptor]:
        """The latest version of every registered tool.

        Raises:
            RegistryUnavailable: no answer within ``timeout_s`` seconds, or a refusal.
        """
        return (await self._registry(Rpc.REGISTRY_LIST, b"{}", timeout_s)).descriptors or []

    async def describe(self, tool: str, version: str | None = None, timeout_s: float = 5.0) -> ToolDescriptor:
        """One tool's descriptor (``version=None``: the latest).

        Raises:
            RegistryUnavailable: no answer, or no such tool.
        """
        body = msgspec.json.encode({"tool": tool, "version": version})
        found = (await self._registry(Rpc.REGISTRY_GET, body, timeout_s)).descriptor
        assert found is not None
        return found

    async def _registry(self, subject: str, body: bytes, timeout_s: float) -> _Listing:
        try:
            reply = await self._nc.request(subject, body, timeout=timeout_s)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
            raise RegistryUnavailable(f"registry did not answer on {subject}: {error!r}") from None
        listing = msgspec.json.decode(reply.data, type=_Listing)
        if not listing.ok:
            raise RegistryUnavailable(listing.reason)
        return listing

    async def submit(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        version: str | None = None,
        request_id: str | None = None,
    ) -> str:
        """Publish one tool request and return its request id (the receipt comes later).

        Raises:
            ValueError: an argument has no canonical JSON form (e.g. an integer beyond
                ±(2**53 − 1)); the gateway would refuse it, so it is not sent.
            nats.errors.TimeoutError: the stream did not confirm the request.
            DuplicateRequest: ``request_id`` was submitted before (inside the duplicate window).
        """
        if problem := unrepresentable(arguments):
            raise ValueError(f"argument value at {problem}")
        request_id = request_id or uuid.uuid4().hex
        request = ToolRequested(
            event_id=request_id,
            occurred_at=datetime.now(UTC),
            request_id=request_id,
            tool=tool,
            operation=operation,
            arguments=arguments,
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            version=version,
        )
        self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        ack = await publish_event(self._js, Subjects.request(self.principal), request)
        if ack.duplicate:
            self._waiting.pop(request_id, None)
            raise DuplicateRequest(f"the stream already holds a request with id {request_id!r}")
        return request_id

    async def receipt(self, request_id: str, timeout_s: float = 60.0) -> ReceiptIssued:
        """Wait up to ``timeout_s`` seconds for the receipt of ``request_id``.

        A result kept out of band (``result_ref``) is fetched and put into ``result``; if
        it cannot be read back, the receipt is returned as is (``result`` None) and a
        warning is logged — :meth:`fetch_result` raises the reason.

        Raises:
            TimeoutError: no receipt in time (the request may still be pending approval).
        """
        return await self._with_result(await self._receipt(request_id, timeout_s))

    async def _receipt(self, request_id: str, timeout_s: float) -> ReceiptIssued:
        if request_id in self._arrived:
            return self._arrived.pop(request_id)
        future = self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        if not future.done() and (stored := await self._stored(request_id)):
            self._waiting.pop(request_id, None)
            return stored
        return await asyncio.wait_for(asyncio.shield(future), timeout_s)

    async def _with_result(self, issued: ReceiptIssued) -> ReceiptIssued:
        if issued.result_ref is None:
            return issued
        try:
            return msgspec.structs.replace(issued, result=await self.fetch_result(issued.result_ref))
        except ResultUnavailable as error:
            log.warning("receipt %s: %s", issued.request_id, error)
            return issued

    async def fetch_result(self, ref: ResultRef) -> Any:
        """Read a result kept out of band: its chunks, gunzipped (RFC 1952), checked, decoded.

        Raises:
            ResultUnavailable: a chunk is missing, or the bytes do not match the receipt's
                size and SHA-256.
        """
        packed = b"".join([await self._chunk(f"{ref.subject_prefix}.{index}") for index in range(ref.chunks)])
        data = _gunzip(packed, ref.size_bytes)
        if len(data) != ref.size_bytes or "sha256:" + hashlib.sha256(data).hexdigest() != ref.sha256:
            raise ResultUnavailable(f"the result at {ref.subject_prefix} does not match its receipt")
        return msgspec.json.decode(data)

    async def _chunk(self, subject: str) -> bytes:
        try:
            return (await self._js.get_last_msg(catalog.RESULTS_STREAM, subject, direct=True)).data or b""
        except nats.errors.Error as error:
            raise ResultUnavailable(f"result chunk {subject} cannot be read: {type(error).__name__}") from None

    async def _stored(self, request_id: str) -> ReceiptIssued | None:
        try:
            found = await fetch_last(self._js, Subjects.receipt(self.principal, request_id))
        except (nats.errors.Error, msgspec.DecodeError):
            return None
        return found if isinstance(found, ReceiptIssued) else None

    async def invoke(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        version: str | None = None,
        timeout_s: float = 60.0,
    ) -> ReceiptIssued:
        """Submit one call and wait for its receipt.

        Returns:
            The receipt. One that ends ``denied`` with reason code ``rate_limited`` carries
            ``retry_after_s``: seconds until the same call would fit the rate again.

        Raises:
            TimeoutError: no receipt within ``timeout_s`` seconds.
        """
        request_id = await self.submit(tool, operation, arguments, idempotency_key=idempotency_key, version=version)
        return await self.receipt(request_id, timeout_s)


def _gunzip(packed: bytes, size_bytes: int) -> bytes:
    """Decompress at most ``size_bytes + 1`` bytes, so a forged chunk cannot inflate without bound."""
    try:
        return zlib.decompressobj(wbits=31).decompress(packed, size_bytes + 1)
    except zlib.error as error:
        raise ResultUnavailable(f"the stored result is not gzip: {error}") from None
