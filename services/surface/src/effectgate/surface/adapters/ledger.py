"""The ledger of MCP calls in the NATS KV bucket ``EFFECTGATE_MCP_CALLS``, shared by every replica.

Each key (``<principal>.<call digest>``, :func:`effectgate.surface.calls.call_key`) holds one
:class:`~effectgate.surface.calls.CallEntry` as JSON. Writes are compare-and-set on the key's
revision (``kv.create`` / ``kv.update(last=…)``), so two replicas that get the same new call at
once agree on one request: the one whose write loses reads the winner's entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from effectgate.surface.calls import CallEntry

__all__ = ["Ledger"]

_entry = msgspec.json.Decoder(CallEntry)
log = logging.getLogger("effectgate.surface.ledger")


class Ledger:
    """Compare-and-set access to the calls bucket.

    Args:
        kv: the bound ``EFFECTGATE_MCP_CALLS`` bucket.
    """

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def claim(self, key: str, fresh: CallEntry, reuse: Callable[[CallEntry], bool]) -> tuple[CallEntry, bool]:
        """The entry a call belongs to: the stored one when ``reuse`` accepts it, else ``fresh`` (stored).

        Returns:
            ``(entry, new)``: ``new`` is true when ``fresh`` was stored (the call must be sent).

        Raises:
            nats.errors.Error: the bucket could not be read or written.
        """
        for _ in range(5):
            try:
                await self._kv.create(key, msgspec.json.encode(fresh))
                return fresh, True
            except KeyWrongLastSequenceError:
                pass
            found = await self._read(key)
            if found is None:
                continue  # deleted or expired between the two steps: create again
            entry, revision = found
            if reuse(entry):
                return entry, False
            if await self._swap(key, fresh, revision):
                return fresh, True
        raise KeyWrongLastSequenceError(description=f"ledger key {key} kept changing")

    async def put(self, key: str, entry: CallEntry) -> None:
        """Store ``entry`` as the call's state (its outcome was returned, or it was published)."""
        await self._kv.put(key, msgspec.json.encode(entry))

    async def _read(self, key: str) -> tuple[CallEntry, int] | None:
        try:
            stored = await self._kv.get(key)
        except KeyNotFoundError:
            return None
        try:
            return _entry.decode(stored.value or b""), int(stored.revision or 0)
        except msgspec.DecodeError:
            log.warning("ledger key %s holds no call entry: replaced", key)
            return CallEntry(request_id="", idempotency_key="", read_only=True, settled_at=0.0, keep=False), int(
                stored.revision or 0
            )

    async def _swap(self, key: str, fresh: CallEntry, revision: int) -> bool:
        try:
            await self._kv.update(key, msgspec.json.encode(fresh), last=revision)
        except KeyWrongLastSequenceError:
            return False
        return True
