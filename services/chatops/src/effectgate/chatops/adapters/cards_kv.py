"""The bot's card records in the JetStream KV bucket :data:`catalog.CARDS_BUCKET`."""

from __future__ import annotations

import hashlib
from functools import partial

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue

from effectgate.chatops.domain import CardRecord
from effectgate.contracts.bus import catalog
from effectgate.shared.stores.binding import bound

__all__ = ["KvCardStore"]

_record = msgspec.json.Decoder(CardRecord)


class KvCardStore:
    """:class:`~effectgate.chatops.ports.CardStore` over a NATS KV bucket.

    Raises (every method):
        nats.errors.Error: the bucket cannot be read or written (the message is retried).
    """

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = catalog.CARDS_BUCKET) -> KvCardStore:
        """Bind to the (provisioned) cards bucket."""
        return cls(await bound(f"bucket {bucket}", partial(js.key_value, bucket)))

    async def get(self, approval_id: str) -> CardRecord | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.get`."""
        data = await self._value(approval_id)
        return _record.decode(data) if data else None

    async def put(self, record: CardRecord) -> None:
        """See :meth:`~effectgate.chatops.ports.CardStore.put`."""
        approval_id = record.card.approval_id.encode()
        await self._kv.put(record.card.approval_id, msgspec.json.encode(record))
        for request_id in record.card.request_ids:
            await self._kv.put(f"req.{request_id}", approval_id)
        if record.message_id:
            await self._kv.put(_message_key(record.room, record.message_id), approval_id)

    async def approval_of_request(self, request_id: str) -> str | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.approval_of_request`."""
        data = await self._value(f"req.{request_id}")
        return data.decode() if data else None

    async def approval_of_message(self, room: str, message_id: str) -> str | None:
        """See :meth:`~effectgate.chatops.ports.CardStore.approval_of_message`."""
        data = await self._value(_message_key(room, message_id))
        return data.decode() if data else None

    async def _value(self, key: str) -> bytes | None:
        try:
            entry = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        return entry.value or None


def _message_key(room: str, message_id: str) -> str:
    return "msg." + hashlib.sha256(f"{room}\0{message_id}".encode()).hexdigest()
