"""Reading a result kept out of band: its gzip chunks in the results stream, checked against the receipt.

The chunks are read back by the executor (:mod:`effectgate.sdk.records`: an agent has no JetStream
rights); what it answers is checked as the stream's own bytes were (size, SHA-256).

The whole reason and redactions of a receipt too large for one message are kept the same way
(the receipt's ``detail_ref``, :mod:`effectgate.contracts.receipt_detail`): :func:`read_detail`.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from typing import Any

import msgspec

from effectgate.contracts.events import ReceiptIssued, ResultRef
from effectgate.contracts.receipt_detail import ReceiptDetail, with_detail
from effectgate.sdk.errors import RecordsNoAnswer, ResultUnavailable
from effectgate.sdk.records import RecordReader

__all__ = ["filled_in", "read_detail", "read_result"]

log = logging.getLogger("effectgate.sdk")


async def filled_in(records: RecordReader, issued: ReceiptIssued) -> ReceiptIssued:
    """``issued`` with what it keeps out of band put back: its whole reason and redactions, its result.

    What cannot be read back is left as the receipt carries it (the cut reason, ``result``
    None), with a warning naming the receipt; never raises.
    """
    if issued.detail_ref is not None:
        issued = await _with_detail(records, issued, issued.detail_ref)
    if issued.result_ref is None:
        return issued
    try:
        return msgspec.structs.replace(issued, result=await read_result(records, issued.result_ref))
    except ResultUnavailable as error:
        log.warning("receipt %s: %s", issued.request_id, error)
        return issued


async def _with_detail(records: RecordReader, issued: ReceiptIssued, ref: ResultRef) -> ReceiptIssued:
    """``issued`` with its whole reason and redactions, when they were kept out of band and can be read."""
    try:
        return with_detail(issued, await read_detail(records, ref))
    except ResultUnavailable as error:
        log.warning("receipt %s: its whole reason cannot be read: %s", issued.request_id, error)
        return issued


async def read_result(records: RecordReader, ref: ResultRef) -> Any:
    """The decoded result ``ref`` points at.

    Raises:
        ResultUnavailable: a chunk is missing, or the bytes do not match the receipt's size and SHA-256.
    """
    packed = b"".join([await _chunk(records, f"{ref.subject_prefix}.{index}") for index in range(ref.chunks)])
    data = _gunzip(packed, ref.size_bytes)
    if len(data) != ref.size_bytes or "sha256:" + hashlib.sha256(data).hexdigest() != ref.sha256:
        raise ResultUnavailable(f"the result at {ref.subject_prefix} does not match its receipt")
    return msgspec.json.decode(data)


async def read_detail(records: RecordReader, ref: ResultRef) -> ReceiptDetail:
    """The whole reason and redactions a receipt's ``detail_ref`` points at.

    Raises:
        ResultUnavailable: as :func:`read_result`, or the stored JSON is not a receipt detail.
    """
    try:
        return msgspec.convert(await read_result(records, ref), ReceiptDetail)
    except msgspec.ValidationError as error:
        raise ResultUnavailable(f"the receipt detail at {ref.subject_prefix} is not one: {error}") from None


async def _chunk(records: RecordReader, subject: str) -> bytes:
    try:
        chunk = await records.read(subject)
    except RecordsNoAnswer as error:
        raise ResultUnavailable(f"result chunk {subject} cannot be read: {error}") from None
    if chunk is None:
        raise ResultUnavailable(f"result chunk {subject} is not stored (expired or never kept)")
    return chunk


def _gunzip(packed: bytes, size_bytes: int) -> bytes:
    """Decompress at most ``size_bytes + 1`` bytes, so a forged chunk cannot inflate without bound."""
    try:
        return zlib.decompressobj(wbits=31).decompress(packed, size_bytes + 1)
    except zlib.error as error:
        raise ResultUnavailable(f"the stored result is not gzip: {error}") from None
