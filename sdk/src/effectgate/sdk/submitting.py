"""Submitting a request: arguments checked and sealed, the receipt expected, the request put into the stream.

A request goes into the gateway's stream with ``Nats-Msg-Id`` set to its request id, so the
stream drops a second one with the same id (:class:`~effectgate.sdk.errors.DuplicateRequest`).
One larger than the server's payload limit (``max_payload``) is not sent: its receipt, made
here and unsigned (:mod:`effectgate.sdk.local_receipts`), ends it ``refused``/``oversized``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import nats
from nats.aio.client import Client
from nats.js.api import PubAck
from nats.js.errors import APIError

from effectgate.contracts.bus.catalog import STREAM, Subjects
from effectgate.contracts.bus.stream_limits import store_full
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.tools.descriptors import SEMVER, TOOL_NAME
from effectgate.sdk.descriptors import Describe, DescriptorCache
from effectgate.sdk.errors import DuplicateRequest, GatewayStoreFull
from effectgate.sdk.local_receipts import oversized_receipt
from effectgate.sdk.sealing import Sealer
from effectgate.sdk.tracing import with_trace_context
from effectgate.sdk.waiting import ReceiptWaiter

__all__ = ["Submitter"]


class Submitter:
    """Puts one principal's requests into the stream.

    Args:
        nc: the client's connection.
        principal: whose requests (published on ``tg.req.<principal>``).
        waiter: told of each request before it is published.
        sealer: seals secret arguments.
        descriptors: the descriptors to seal by.
        describe: looks a tool's descriptor up when ``descriptors`` holds no fresh one.
    """

    def __init__(
        self,
        nc: Client,
        principal: str,
        waiter: ReceiptWaiter,
        sealer: Sealer,
        descriptors: DescriptorCache,
        describe: Describe,
    ) -> None:
        self._nc, self._js, self.principal, self._waiter = nc, nc.jetstream(), principal, waiter
        self._sealer, self._descriptors, self._describe = sealer, descriptors, describe

    async def submit(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        key: str | None,
        version: str | None,
        request_id: str,
    ) -> str:
        """Check, seal and publish one call; its request id (raises as :meth:`effectgate.sdk.ToolClient.submit`)."""
        if problem := unrepresentable(arguments):
            raise ValueError(f"argument value at {problem}")
        arguments = await self._sealed(tool, operation, arguments, version, key)
        request = _request(tool, operation, arguments, key, version, request_id)
        self._waiter.expect(request.request_id)
        return await self._publish(request)

    async def _publish(self, request: ToolRequested) -> str:
        request_id = request.request_id
        try:
            ack = await self._stored(request)
        except nats.errors.MaxPayloadError:
            self._waiter.forget(request_id)
            self._waiter.keep(oversized_receipt(request, self.principal, self._nc.max_payload))
            return request_id
        if ack.duplicate:
            self._waiter.forget(request_id)
            raise DuplicateRequest(f"the stream already holds a request with id {request_id!r}")
        return request_id

    async def _stored(self, request: ToolRequested) -> PubAck:
        """The stream's ack of ``request``; a full stream's refusal raised as :class:`GatewayStoreFull`."""
        headers = with_trace_context({"Nats-Msg-Id": request.request_id})  # the stream drops a second one by its id
        try:
            return await self._js.publish(
                Subjects.request(self.principal), encode(request), stream=STREAM, headers=headers
            )
        except APIError as error:
            self._waiter.forget(request.request_id)
            if (limit := store_full(error)) is not None:
                raise GatewayStoreFull(request.request_id, limit) from None
            raise

    async def _sealed(
        self, tool: str, operation: str, arguments: dict[str, Any], version: str | None, key: str | None
    ) -> dict[str, Any]:
        if not TOOL_NAME.match(tool) or (version is not None and not SEMVER.match(version)):
            return arguments  # the policy refuses the name before it looks at any argument
        descriptor = await self._descriptors.for_sealing(tool, version, self._describe)
        if descriptor is None:
            return arguments  # nothing is known secret; the policy denies the unknown tool
        return self._sealer.seal_arguments(descriptor, operation, arguments, key)


def _request(
    tool: str, operation: str, arguments: dict[str, Any], key: str | None, version: str | None, request_id: str
) -> ToolRequested:
    """The request event of one call (a fresh idempotency key unless ``key``)."""
    return ToolRequested(
        event_id=request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        tool=tool,
        operation=operation,
        arguments=arguments,
        idempotency_key=key or uuid.uuid4().hex,
        version=version,
    )
