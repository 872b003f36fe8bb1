"""Which recorded events must carry a signature, and checking it while the chain is verified.

Decisions and policy publications are signed by the policy key, approval outcomes by the
approvals key, receipts and resolutions of ``uncertain`` calls (``tg.resolution.*.*``) by the
executor's receipts key (Ed25519, RFC 8032, over the RFC 8785 canonical JSON of the event as sent
without its ``signature``: :func:`effectgate.contracts.integrity.signing.verify_body`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.audit.domain import AuditRecord
from effectgate.audit.sentinel import SIGNED
from effectgate.contracts.bus.catalog import matches
from effectgate.contracts.integrity.signing import verify_body
from effectgate.contracts.rpc.audit import SignatureFault

__all__ = ["SIGNED_BY", "SignatureCheck", "SignatureFault", "signature_fault"]

SIGNED_BY: Final[Mapping[str, str]] = {str(rule.event.__struct_config__.tag): rule.key for rule in SIGNED}
"""Event type → the name of the key that signs it (``<name>.pub`` verifies it), from :data:`sentinel.SIGNED`."""


def _signer(record: AuditRecord) -> str | None:
    """The name of the key that signs ``record``: its type's signer, when it is on that type's signed subject."""
    rule = next((rule for rule in SIGNED if matches(rule.pattern, record.subject)), None)
    return rule.key if rule is not None and str(rule.event.__struct_config__.tag) == record.event_type else None


def signature_fault(record: AuditRecord, keys: Mapping[str, Ed25519PublicKey]) -> str | None:
    """Why ``record``'s signature does not verify, or ``None`` (also for unsigned event types)."""
    signer = _signer(record)
    if signer is None:
        return None
    key = keys.get(signer)
    if key is None:
        return f"no {signer}.pub to verify a {record.event_type} with"
    try:
        body = msgspec.json.decode(record.payload)
    except msgspec.DecodeError:
        return "payload is not JSON"
    if not isinstance(body, dict) or not body.get("signature"):
        return f"unsigned {record.event_type}"
    return None if verify_body(body, key) else f"signature does not verify under {signer}.pub"


class SignatureCheck:
    """Checks signatures of the records passing through :meth:`watch`, keeping the first few faults.

    Args:
        keys: key name (``policy``, ``approvals``, ``receipts``) → public key.
        keep: how many faults to keep (all are counted).
    """

    def __init__(self, keys: Mapping[str, Ed25519PublicKey], keep: int = 20) -> None:
        self._keys, self._keep = keys, keep
        self.faults: list[SignatureFault] = []
        self.count = 0

    def watch(self, records: Iterable[AuditRecord]) -> Iterator[AuditRecord]:
        """Yield ``records`` unchanged, checking each one's signature on the way."""
        for record in records:
            if (reason := signature_fault(record, self._keys)) is not None:
                self.count += 1
                if len(self.faults) < self._keep:
                    self.faults.append(
                        SignatureFault(sequence=record.sequence, event_type=record.event_type, reason=reason)
                    )
            yield record
