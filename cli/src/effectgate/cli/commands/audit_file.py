"""An exported audit chain: writing it page by page, and verifying it offline with public keys alone.

The file is JSON Lines, one :class:`~effectgate.audit.domain.AuditRecord` per line in chain
order from sequence 1 (the same records ``tg.audit.export`` answers with).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec

from effectgate.audit.domain import AuditRecord, VerifyResult, verify_chain
from effectgate.audit.signatures import SIGNED_BY, SignatureCheck, SignatureFault
from effectgate.contracts.errors import Problem
from effectgate.contracts.rpc.audit import EXPORT_PAGE
from effectgate.shared.config.keyring import load_public_keys

__all__ = ["ExportInvalid", "OfflineVerification", "export_chain", "verify_file"]


class _ExportedRecord(AuditRecord, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An :class:`AuditRecord` of format 1 as exported: no member the format does not define."""


_record = msgspec.json.Decoder(_ExportedRecord)


class ExportInvalid(Problem):
    """The export file cannot be read as a chain, or a public key it needs is missing."""


@dataclass(frozen=True)
class OfflineVerification:
    """What :func:`verify_file` found: the chain check and the signatures that did not verify."""

    result: VerifyResult
    bad_signatures: list[SignatureFault]
    bad_signature_count: int

    @property
    def ok(self) -> bool:
        """The chain links and every signature verify."""
        return self.result.ok and not self.bad_signature_count


async def export_chain(page: Callable[[int, int], Awaitable[dict[str, Any]]], sink: IO[bytes]) -> int:
    """Write the whole chain to ``sink`` as JSON Lines; return the number of records written.

    Args:
        page: ``page(after, limit)`` → a ``tg.audit.export`` answer.
        sink: where the lines go (a file opened for binary writing).

    Raises:
        ExportInvalid: the audit service refused a page.
    """
    after = written = 0
    while True:
        reply = await page(after, EXPORT_PAGE)
        if not reply.get("ok"):
            raise ExportInvalid(f"the audit service refused the export: {reply.get('reason')}")
        records = reply.get("records") or []
        for record in records:
            sink.write(msgspec.json.encode(record) + b"\n")
        if not records:
            return written
        written, after = written + len(records), int(records[-1]["sequence"])


def verify_file(path: Path, keys_dir: Path) -> OfflineVerification:
    """Verify an exported chain with the public keys in ``keys_dir``.

    Raises:
        ExportInvalid: a key is missing (named), or a line is not an audit record (its number named).
        OSError: the file or a key cannot be read.
    """
    keys = load_public_keys(keys_dir, tuple(sorted(set(SIGNED_BY.values()))))
    if missing := sorted(set(SIGNED_BY.values()) - set(keys)):
        raise ExportInvalid(
            f"{keys_dir} lacks {', '.join(name + '.pub' for name in missing)}: cannot verify signatures"
        )
    signatures = SignatureCheck(keys)
    with path.open("rb") as source:
        result = verify_chain(signatures.watch(_records(source)))
    return OfflineVerification(result, signatures.faults, signatures.count)


def _records(source: IO[bytes]) -> Iterator[AuditRecord]:
    for number, line in enumerate(source, start=1):
        if line.strip():
            try:
                yield _record.decode(line)
            except msgspec.DecodeError as error:
                raise ExportInvalid(f"line {number} is not an audit record: {error}") from None
