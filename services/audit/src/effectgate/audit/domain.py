"""The audit trail as a hash chain: building records and verifying the chain.

Each :class:`AuditRecord` commits to the hash of the record before it, so editing, deleting or
reordering any stored record breaks every later link. The record hash is SHA-256 over the RFC
8785 canonical JSON (:func:`effectgate.contracts.integrity.canonical.sha256_hex`) of the
record's fields, its predecessor's hash and the SHA-256 of its payload.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from effectgate.audit.errors import ChainBroken
from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.rpc.audit import AuditEntry, AuditRecord, ChainFault, VerifyResult

__all__ = [
    "GENESIS",
    "AuditRecord",
    "ChainFault",
    "VerifyResult",
    "chain_hash",
    "AuditEntry",
    "next_record",
    "payload_sha256",
    "raise_if_broken",
    "verify_chain",
]

GENESIS = "sha256:" + "0" * 64
"""The ``prev_hash`` of the first record of a chain."""


_CHAINED_FIELDS = ("sequence", *(name for name in AuditEntry.__struct_fields__ if name != "payload"))
"""Fields hashed as they are; the payload enters the hash as its SHA-256."""


def raise_if_broken(result: VerifyResult) -> None:
    """Raise when the chain ``result`` checked is broken; do nothing when it is ``ok``.

    Raises:
        ChainBroken: with ``first_broken``, ``reason_code`` and ``reason``.
    """
    if result.first_broken is not None and result.reason_code is not None:
        raise ChainBroken(result.first_broken, result.reason_code.value, result.reason)


def payload_sha256(payload: str) -> str:
    """Return ``sha256:<64 hex>`` of the UTF-8 bytes of ``payload``.

    Raises:
        UnicodeEncodeError: ``payload`` holds a lone surrogate.
    """
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chain_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    """Return the hash of one record.

    Args:
        prev_hash: hash of the previous record, or :data:`GENESIS`.
        fields: the record's ``sequence``, ``stream_seq``, ``subject``, ``event_type``,
            ``request_id``, ``principal``, ``occurred_at`` and ``payload`` (other keys are
            ignored).

    Returns:
        ``sha256:<64 hex>`` of the RFC 8785 canonical JSON of those fields (the payload
        replaced by ``payload_sha256``) plus ``prev_hash``.

    Raises:
        KeyError: a field is missing.
    """
    body: dict[str, Any] = {name: fields[name] for name in _CHAINED_FIELDS}
    body["prev_hash"] = prev_hash
    body["payload_sha256"] = payload_sha256(fields["payload"])
    return sha256_hex(body)


def next_record(prev: AuditRecord | None, entry: AuditEntry) -> AuditRecord:
    """Chain ``entry`` after ``prev`` (as the first record when ``prev`` is ``None``).

    Returns:
        The new record, with ``sequence``, ``prev_hash`` and ``hash`` filled in.
    """
    fields: dict[str, Any] = {"sequence": 1 if prev is None else prev.sequence + 1, **msgspec.structs.asdict(entry)}
    prev_hash = GENESIS if prev is None else prev.hash
    return AuditRecord(**fields, prev_hash=prev_hash, hash=chain_hash(prev_hash, fields))


def verify_chain(records: Iterable[AuditRecord]) -> VerifyResult:
    """Verify records given in chain order, stopping at the first broken one.

    Detects an edited field or payload (hash mismatch), a deleted record (sequence gap),
    a reordered record (gap or out of order) and a forged ``prev_hash`` (broken link).

    Args:
        records: the chain from sequence 1 upwards; may be a lazy iterator.

    Returns:
        ``ok`` with the number of records checked, or the first broken record's
        sequence with a :class:`ChainFault` and a reason naming what is wrong.
    """
    prev: AuditRecord | None = None
    checked = 0
    for record in records:
        checked += 1
        fault = _fault(prev, record)
        if fault is not None:
            code, reason = fault
            return VerifyResult(
                ok=False, checked=checked, first_broken=record.sequence, reason=reason, reason_code=code
            )
        prev = record
    return VerifyResult(ok=True, checked=checked, first_broken=None, reason=f"{checked} records verified")


def _fault(prev: AuditRecord | None, record: AuditRecord) -> tuple[ChainFault, str] | None:
    """Return what is wrong with ``record`` following ``prev``, or ``None``."""
    seq = record.sequence
    expected = 1 if prev is None else prev.sequence + 1
    if seq > expected:
        missing = f"record {expected}" if seq == expected + 1 else f"records {expected}..{seq - 1}"
        return (
            ChainFault.SEQUENCE_GAP,
            f"expected sequence {expected}, found {seq}: {missing} missing or moved",
        )
    if seq < expected:
        return (
            ChainFault.OUT_OF_ORDER,
            f"expected sequence {expected}, found {seq}: out of order or duplicated",
        )
    link = GENESIS if prev is None else prev.hash
    if record.prev_hash != link:
        return ChainFault.PREV_LINK, f"record {seq}: prev_hash does not match the hash of record {seq - 1}"
    if chain_hash(record.prev_hash, msgspec.structs.asdict(record)) != record.hash:
        return (
            ChainFault.HASH_MISMATCH,
            f"record {seq}: content does not match its hash (a field or the payload was edited)",
        )
    return None
