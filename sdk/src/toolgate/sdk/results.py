"""Reading a result kept out of band: its gzip chunks in the results stream, checked against the receipt.

The whole reason and redactions of a receipt too large for one message are kept the same way
(the receipt's ``detail_ref``, :mod:`toolgate.contracts.receipt_detail`): :func:`read_detail`.

A result too large for the receipt is stored as ``tg.result.<principal>.<run>.<index>``
chunks of one gzip member (RFC 1952); the receipt's :class:`~toolgate.contracts.events.ResultRef`
gives their count, the decompressed size and its SHA-256. The chunks are read by direct get
(the agent's permissions allow its own results only) and decompressed to at most the
stated size plus one byte, so a forged chunk cannot inflate without bound.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import msgspec
import nats
from nats.js import JetStreamContext

from toolgate.contracts import catalog
from toolgate.contracts.events import ResultRef
from toolgate.contracts.receipt_detail import ReceiptDetail
from toolgate.sdk.errors import ResultUnavailable

__all__ = ["read_detail", "read_result"]


async def read_result(js: JetStreamContext, ref: ResultRef) -> Any:
    """The decoded result ``ref`` points at.

    Raises:
        ResultUnavailable: a chunk is missing, or the bytes do not match the receipt's size and SHA-256.
    """
    packed = b"".join([await _chunk(js, f"{ref.subject_prefix}.{index}") for index in range(ref.chunks)])
    data = _gunzip(packed, ref.size_bytes)
    if len(data) != ref.size_bytes or "sha256:" + hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ResultUnavailable(f"the result at {ref.subject_prefix} does not match its receipt")
    return msgspec.json.decode(data)


async def read_detail(js: JetStreamContext, ref: ResultRef) -> ReceiptDetail:
    """The whole reason and redactions a receipt's ``detail_ref`` points at.

    Raises:
        ResultUnavailable: as :func:`read_result`, or the stored JSON is not a receipt detail.
    """
    try:
        return msgspec.convert(await read_result(js, ref), ReceiptDetail)
    except msgspec.ValidationError as error:
        raise ResultUnavailable(f"the receipt detail at {ref.subject_prefix} is not one: {error}") from None


async def _chunk(js: JetStreamContext, subject: str) -> bytes:
    try:
        return (await js.get_last_msg(catalog.RESULTS_STREAM, subject, direct=True)).data or b""
    except nats.errors.Error as error:
        raise ResultUnavailable(f"result chunk {subject} cannot be read: {type(error).__name__}") from None


def _gunzip(packed: bytes, size_bytes: int) -> bytes:
    """Decompress at most ``size_bytes + 1`` bytes, so a forged chunk cannot inflate without bound."""
    try:
        return zlib.decompressobj(wbits=31).decompress(packed, size_bytes + 1)
    except zlib.error as error:
        raise ResultUnavailable(f"the stored result is not gzip: {error}") from None
