"""Reading an agent's own stored records back for it: the answer of ``tg.records.get.<principal>``.

The executor answers (its ``handlers``); agents have no JetStream rights. The wire contract is
:mod:`effectgate.contracts.rpc.records`: a found record is answered with its stored bytes as they
are, anything else with a :class:`~effectgate.contracts.rpc.records.RecordReply` naming why not.
"""

from __future__ import annotations

import logging
from typing import Final

import msgspec
import nats
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from effectgate.contracts.bus.catalog import StoredRecord
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.records import (
    MAX_QUERY_BYTES,
    STATUS_HEADER,
    RecordCode,
    RecordQuery,
    RecordReply,
    refusal_of,
)
from effectgate.shared.runtime.assembly import Reply

__all__ = ["HEADER_BYTES", "record_answer"]

log = logging.getLogger("effectgate")

HEADER_BYTES: Final = len(f"NATS/1.0\r\n{STATUS_HEADER}: {RecordCode.FOUND.value}\r\n\r\n")
"""What a found record's status header adds to its body on the wire, bytes (the ``NATS/1.0`` line, the
header, a blank line, as nats-py writes them): the server counts it in ``max_payload``. JetStream keeps
no message within this of ``max_payload`` (its own record of the message is larger), so every record
the executor's server stored fits its answer."""

_query = msgspec.json.Decoder(RecordQuery)


async def record_answer(js: JetStreamContext, principal: str, body: bytes, max_payload: int) -> Reply:
    """The answer to ``principal``'s query ``body`` (``{"subject": …}``) on a bus of ``max_payload`` bytes.

    Never raises: a query that is too large, not a query, or names anything but one of
    ``principal``'s receipts, decisions or result chunks is refused, naming why.
    """
    query = _query_of(body)
    if isinstance(query, tuple):
        return refused(*query)
    record = refusal_of(principal, query.subject)
    if not isinstance(record, StoredRecord):
        return refused(*record)
    return await _read(js, record.stream, query.subject, max_payload)


def refused(code: RecordCode, reason: str) -> Reply:
    """An answer without a record: ``code`` in the header, a :class:`RecordReply` as the body."""
    body = msgspec.json.encode(RecordReply(ok=False, reason_code=code, reason=reason))
    return Reply(body, {STATUS_HEADER: code.value})


def _query_of(body: bytes) -> RecordQuery | tuple[RecordCode, str]:
    if len(body) > MAX_QUERY_BYTES:
        return RecordCode.OVERSIZED, f"the query is {len(body)} bytes; at most {MAX_QUERY_BYTES}"
    try:
        return decode_untrusted(_query, body)
    except msgspec.DecodeError as error:
        return RecordCode.MALFORMED, f'not a record query ({{"subject": "<stored subject>"}}): {error}'


async def _read(js: JetStreamContext, stream: str, subject: str, max_payload: int) -> Reply:
    try:
        stored = await js.get_last_msg(stream, subject, direct=True)
    except NotFoundError:
        return refused(RecordCode.NOT_FOUND, f"nothing is stored on {subject}")
    except nats.errors.Error as error:
        log.warning("record %s could not be read: %r", subject, error)
        return refused(RecordCode.UNAVAILABLE, f"{stream} could not be read now ({type(error).__name__}): ask again")
    data = stored.data or b""
    if len(data) + HEADER_BYTES > max_payload:
        reason = f"the record on {subject} is {len(data)} bytes; with its header NATS carries at most {max_payload}"
        return refused(RecordCode.TOO_LARGE, reason)
    return Reply(data, {STATUS_HEADER: RecordCode.FOUND.value})
