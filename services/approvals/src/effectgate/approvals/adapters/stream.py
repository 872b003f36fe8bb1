"""The approvals service's :class:`~effectgate.approvals.ports.ApprovalsBus` on NATS JetStream.

Reads by subject with ``$JS.API.STREAM.MSG.GET`` (``next_by_subj``); the re-check is a core
NATS request to the policy service (``tg.policy.recheck``), the reading of a call's file
references one to the executor (``tg.executor.contents``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.approvals.errors import ApprovalStoreUnavailable
from effectgate.approvals.ports import ReceiptSeen, Waiting
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import (
    ApprovalRequested,
    ApprovalVoted,
    DecisionMade,
    ReceiptIssued,
    decode_event,
    request_identity,
)
from effectgate.contracts.rpc.contents import ContentAnswer, ContentQuery
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.shared.stores.stream import next_message, request_recheck

E = TypeVar("E")

__all__ = ["StreamApprovalsBus"]

log = logging.getLogger("effectgate.approvals")
_contents = msgspec.json.Decoder(ContentAnswer)


class StreamApprovalsBus:
    """:class:`~effectgate.approvals.ports.ApprovalsBus` over one NATS connection.

    Args:
        nc: the connection.
        js: its JetStream context.
        recheck_timeout_s: how long to wait for the policy's answer, seconds.
        contents_timeout_s: how long to wait for the executor's reading of the files, seconds.
    """

    def __init__(
        self, nc: Client, js: JetStreamContext, recheck_timeout_s: float = 2.0, contents_timeout_s: float = 10.0
    ) -> None:
        self._nc, self._js, self._timeout_s = nc, js, recheck_timeout_s
        self._contents_timeout_s = contents_timeout_s

    async def has_receipt(self, principal: str, request_id: str) -> bool:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.has_receipt`.

        Raises:
            ApprovalStoreUnavailable: the stream cannot be read.
        """
        try:
            return await self._next(Subjects.receipt(principal, request_id), 1) is not None
        except nats.errors.Error as error:
            raise _unreadable(error) from error

    async def receipt(self, principal: str, request_id: str) -> ReceiptSeen | None:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.receipt`; ``None`` too when the stream cannot be read.

        Only shown to approvers (never acted on), so an unreadable stream shows no receipt
        rather than failing the listing.
        """
        try:
            message = await self._next(Subjects.receipt(principal, request_id), 1)
            receipt = None if message is None else decode_event(message.data or b"")
        except (nats.errors.Error, msgspec.DecodeError) as error:
            log.warning("receipt of %s/%s not readable: %s", principal, request_id, type(error).__name__)
            return None
        if not isinstance(receipt, ReceiptIssued):
            return None
        return ReceiptSeen(receipt_id=receipt.event_id, outcome=receipt.outcome.value)

    async def resolved(self, principal: str, request_id: str) -> bool:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.resolved`."""
        for kind in ("granted", "rejected"):
            if await self._next(Subjects.approval(kind, principal, request_id), 1) is not None:
                return True
        return await self.has_receipt(principal, request_id)

    def requested(self) -> AsyncIterator[ApprovalRequested]:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.requested`."""
        return self._events(Subjects.APPROVALS_REQUESTED, ApprovalRequested)

    def voted(self, principal: str, request_id: str) -> AsyncIterator[ApprovalVoted]:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.voted`."""
        return self._events(Subjects.approval("voted", principal, request_id), ApprovalVoted)

    async def _events(self, subject: str, kind: type[E]) -> AsyncIterator[E]:
        """Every event of type ``kind`` on ``subject`` (wildcards allowed), oldest first; others skipped."""
        seq = 1
        while (message := await self._next(subject, seq)) is not None:
            seq = message.seq + 1
            try:
                event = decode_event(message.data or b"")
            except msgspec.DecodeError:
                continue
            if isinstance(event, kind):
                yield event

    async def recheck(self, query: RecheckQuery) -> RecheckAnswer | None:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.recheck`."""
        return await request_recheck(self._nc, query, self._timeout_s)

    async def contents(self, query: ContentQuery) -> ContentAnswer | None:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.contents`."""
        try:
            reply = await self._nc.request(Rpc.EXECUTOR_CONTENTS, msgspec.json.encode(query), self._contents_timeout_s)
            return _contents.decode(reply.data)
        except (nats.errors.Error, msgspec.DecodeError) as error:
            log.warning("the executor did not read the call's files: %s", type(error).__name__)
            return None

    async def _next(self, subject: str, seq: int) -> Any:
        return await next_message(self._js, subject, seq)

    async def decision(self, principal: str, request_id: str) -> DecisionMade | None:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.decision`; ``None`` too for an undecodable message.

        Raises:
            ApprovalStoreUnavailable: the stream cannot be read.
        """
        try:
            message = await self._next(Subjects.decision(principal, request_id), 1)
            event = None if message is None else decode_event(message.data or b"")
        except nats.errors.Error as error:
            raise _unreadable(error) from error
        except msgspec.DecodeError:
            return None
        return event if isinstance(event, DecisionMade) else None

    async def waiting(self, limit: int) -> Waiting:
        """See :meth:`~effectgate.approvals.ports.ApprovalsBus.waiting`."""
        try:
            floors = [await self._floor(spec.durable) for spec in (catalog.POLICY_CONSUMER, catalog.APPROVALS_CONSUMER)]
            undecided, complete_r = await self._after(Subjects.REQUESTS, floors[0], limit, _requested_by)
            unopened, complete_d = await self._after(Subjects.NEEDS_APPROVAL, floors[1], limit, _decided_for)
        except nats.errors.Error as error:
            raise _unreadable(error) from error
        return Waiting(requests=(*undecided, *unopened), complete=complete_r and complete_d)

    async def _floor(self, durable: str) -> int:
        """The stream sequence up to which ``durable`` acknowledged every message."""
        info = await self._js.consumer_info(catalog.STREAM, durable)
        return int(info.ack_floor.stream_seq or 0) if info.ack_floor is not None else 0

    async def _after(
        self, subject: str, floor: int, limit: int, read: Callable[[Any], tuple[str, str] | None]
    ) -> tuple[list[tuple[str, str]], bool]:
        """Up to ``limit`` requests of the messages on ``subject`` after ``floor``; and whether that was all."""
        found: list[tuple[str, str]] = []
        seq = floor + 1
        while (message := await self._next(subject, seq)) is not None:
            if len(found) == limit:
                return found, False
            seq = message.seq + 1
            if (request := read(message)) is not None:
                found.append(request)
        return found, True


def _unreadable(error: Exception) -> ApprovalStoreUnavailable:
    log.warning("stream not readable: %s", type(error).__name__)
    return ApprovalStoreUnavailable("approval_store_unavailable", "the stream cannot be read; try again")


def _requested_by(message: Any) -> tuple[str, str] | None:
    """``(principal, request id)`` of a stored tool request, by the rule every service applies."""
    principal = Subjects.principal_of_request(message.subject or "")
    if principal is None:
        return None
    msg_id = (message.headers or {}).get("Nats-Msg-Id")
    return principal, request_identity(message.data or b"", msg_id, message.seq)


def _decided_for(message: Any) -> tuple[str, str] | None:
    """``(principal, request id)`` of a stored copy of a ``needs_approval`` decision, from its subject."""
    return Subjects.needs_approval_of(message.subject or "")
