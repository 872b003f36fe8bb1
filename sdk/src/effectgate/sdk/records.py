"""Reading back one's own stored records: asked of the executor on ``tg.records.get.<principal>``.

An agent has no JetStream rights; the executor reads its stored receipt, decision or result
chunk for it (:mod:`effectgate.contracts.rpc.records`). What comes back is as untrusted as the
stream's own message was: callers check it (signature, subject, digest) as before.
"""

from __future__ import annotations

from typing import Final

import msgspec
import nats
from nats.aio.client import Client

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.rpc.records import STATUS_HEADER, RecordCode, RecordQuery, RecordReply
from effectgate.sdk.errors import RecordsNoAnswer

__all__ = ["RECORD_TIMEOUT_S", "RecordReader"]

RECORD_TIMEOUT_S: Final = 5.0
"""How long one record is waited for, seconds (JetStream's own default request timeout)."""

_reply = msgspec.json.Decoder(RecordReply)


class RecordReader:
    """Reads ``principal``'s stored records on ``nc``.

    Args:
        nc: the client's connection.
        principal: whose records (the executor answers for no one else's).
        timeout_s: how long each record is waited for, seconds.
    """

    def __init__(self, nc: Client, principal: str, timeout_s: float = RECORD_TIMEOUT_S) -> None:
        self._nc, self.principal, self._timeout_s = nc, principal, timeout_s

    async def read(self, subject: str) -> bytes | None:
        """The bytes stored on ``subject``, as stored; ``None`` when nothing is stored there.

        Raises:
            RecordsNoAnswer: no answer in time (no executor, no connection), or a refusal
                (another principal's subject, the stream unreadable now); the message says which.
        """
        asked = Rpc.records_get(self.principal)
        try:
            reply = await self._nc.request(asked, msgspec.json.encode(RecordQuery(subject=subject)), self._timeout_s)
        except nats.errors.Error as error:
            raise RecordsNoAnswer(f"no answer on {asked} for {subject} within {self._timeout_s:g} s: {error}") from None
        status = (reply.headers or {}).get(STATUS_HEADER)
        if status == RecordCode.FOUND:
            return reply.data
        if status == RecordCode.NOT_FOUND:
            return None
        raise RecordsNoAnswer(f"{subject} was not read: {_why(status, reply.data)}")


def _why(status: str | None, data: bytes) -> str:
    try:
        refusal = _reply.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return f"an answer that is no records reply ({STATUS_HEADER}: {status!r})"
    return f"{refusal.reason_code}: {refusal.reason}"
