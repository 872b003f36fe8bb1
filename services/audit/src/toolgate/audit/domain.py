"""The audit trail as a hash chain: building records and verifying the chain.

Each :class:`AuditRecord` commits to the hash of the record before it, so editing,
deleting or reordering any stored record breaks every later link. The record hash is
SHA-256 over the RFC 8785 canonical JSON (:func:`toolgate.contracts.canonical.sha256_hex`)
of the record's fields, its predecessor's hash and the SHA-256 of its payload. The
first record links to :data:`GENESIS`. ``docs/audit-record.md`` specifies these bytes (format
1) for verifiers written elsewhere; ``docs/audit-record-vector.json`` is its test vector.

Pure: no I/O; the store (``adapters/sqlite.py``) persists what this module builds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import msgspec

from toolgate.audit.errors import ChainBroken
from toolgate.contracts.canonical import sha256_hex
from toolgate.contracts.rpc.audit import AuditEntry, AuditRecord

__all__ = [
    "GENESIS",
    "AuditRecord",
    "ChainFault",
    "VerifyResult",
    "chain_hash",
    "AuditEntry",
    "next_record",
    "payload_sha256",
    "verify_chain",
]

GENESIS = "sha256:" + "0" * 64
"""The ``prev_hash`` of the first record of a chain."""


_CHAINED_FIELDS = ("sequence", *(name for name in AuditEntry.__struct_fields__ if name != "payload"))
"""Fields hashed as they are; the payload enters the hash as its SHA-256."""


class ChainFault(StrEnum):
    """What is wrong with the first broken record of a chain."""

    SEQUENCE_GAP = "sequence_gap"
    """A sequence is skipped: a record was deleted or moved later."""
    OUT_OF_ORDER = "out_of_order"
    """A sequence is not above its predecessor's: records reordered or duplicated."""
    PREV_LINK = "prev_link_broken"
    """``prev_hash`` is not the hash of the previous record."""
    HASH_MISMATCH = "hash_mismatch"
    """The stored hash is not the hash of the record's content: a field or the payload was edited."""


class VerifyResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of verifying a chain.

    Attributes:
        ok: every record checked links and hashes correctly.
        checked: records examined; verification stops at the first broken one.
        first_broken: sequence of the first broken record, ``None`` when ``ok``.
        reason: what is wrong with that record, or a summary when ``ok``.
        reason_code: the :class:`ChainFault`, ``None`` when ``ok``.
    """

    ok: bool
    checked: int
    first_broken: int | None
    reason: str
    reason_code: ChainFault | None = None

    def raise_if_broken(self) -> None:
        """Raise when the chain is broken; do nothing when ``ok``.

        Raises:
            ChainBroken: with ``first_broken``, ``reason_code`` and ``reason``.
        """
        if self.first_broken is not None and self.reason_code is not None:
            raise ChainBroken(self.first_broken, self.reason_code.value, self.reason)


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
