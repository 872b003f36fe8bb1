"""What the policy service reads back from the stream: the spend trail the budget rebuild uses.

Reads take the first messages on a subject (``$JS.API.STREAM.MSG.GET`` with ``next_by_subj``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeVar

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects, names_its_request
from effectgate.contracts.events import ApprovalGranted, DecisionMade, ReceiptIssued, UncertainResolved, decode_event
from effectgate.contracts.integrity.signing import signed_by
from effectgate.shared.stores.stream import next_message

__all__ = ["MAX_EVENTS_PER_SUBJECT", "StreamSpendTrail"]

E = TypeVar("E", ApprovalGranted, ReceiptIssued)

MAX_EVENTS_PER_SUBJECT = 16
"""How many messages of one per-request subject are read at most."""


def _decoded(data: bytes | None) -> Any:
    try:
        return decode_event(data or b"")
    except msgspec.DecodeError:
        return None


class StreamSpendTrail:
    """:class:`~effectgate.policy.ports.SpendTrail` on the ``EFFECTGATE`` stream.

    Args:
        js: the JetStream context.
        policy_key / approvals_key / receipts_key: the public keys events must verify under.
    """

    def __init__(
        self,
        js: JetStreamContext,
        policy_key: Ed25519PublicKey,
        approvals_key: Ed25519PublicKey,
        receipts_key: Ed25519PublicKey,
    ) -> None:
        self._js, self._keys = js, (policy_key, approvals_key, receipts_key)

    async def decisions(self) -> AsyncIterator[DecisionMade]:
        """Every decision signed by the policy key, oldest first.

        Raises:
            nats.errors.Error: the stream cannot be read.
        """
        seq = 1
        while (message := await self._next(Subjects.DECISIONS, seq)) is not None:
            seq = message.seq + 1
            event = _decoded(message.data)
            if (
                isinstance(event, DecisionMade)
                and names_its_request(message.subject, event)
                and signed_by(message.data, self._keys[0])
            ):
                yield event

    async def grant(self, principal: str, request_id: str) -> ApprovalGranted | None:
        """The request's first grant signed by the approvals key, or ``None``."""
        subject = Subjects.approval("granted", principal, request_id)
        return await self._first(subject, ApprovalGranted, self._keys[1])

    async def receipt(self, principal: str, request_id: str) -> ReceiptIssued | None:
        """The request's first receipt signed by the receipts key, or ``None``."""
        return await self._first(Subjects.receipt(principal, request_id), ReceiptIssued, self._keys[2])

    async def settled(self, principal: str, request_id: str) -> str | None:
        """The request's last ``ran`` / ``not_run`` resolution signed by the receipts key, or ``None``."""
        subject, seq, found = Subjects.resolution(principal, request_id), 1, None
        for _ in range(MAX_EVENTS_PER_SUBJECT):
            if (message := await self._next(subject, seq)) is None:
                break
            seq, event = message.seq + 1, _decoded(message.data)
            about = isinstance(event, UncertainResolved) and names_its_request(subject, event)
            if about and event.resolution != "unknown" and signed_by(message.data, self._keys[2]):
                found = event.resolution
        return found

    async def _next(self, subject: str, seq: int) -> Any:
        return await next_message(self._js, subject, seq)

    async def _first(self, subject: str, kind: type[E], key: Ed25519PublicKey) -> E | None:
        seq = 1
        for _ in range(MAX_EVENTS_PER_SUBJECT):
            message = await self._next(subject, seq)
            if message is None:
                return None
            seq, event = message.seq + 1, _decoded(message.data)
            if isinstance(event, kind) and names_its_request(subject, event) and signed_by(message.data, key):
                return event
        return None
