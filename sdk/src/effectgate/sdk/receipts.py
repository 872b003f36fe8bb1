"""Believing a receipt: only one the executor's receipts key signed.

The executor signs every receipt (Ed25519, RFC 8032) over the RFC 8785 canonical JSON of the
receipt without its ``signature`` (:mod:`effectgate.contracts.integrity.signing`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.errors import Problem
from effectgate.contracts.events import ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.signing import load_public_key, verify_body

__all__ = ["ReceiptKeyMissing", "ReceiptVerifier"]

log = logging.getLogger("effectgate.sdk")

_receipt = msgspec.json.Decoder(ReceiptIssued)


class ReceiptKeyMissing(Problem):
    """No executor public key to verify receipts with, and unverified receipts were not asked for."""


class ReceiptVerifier:
    """Turns bytes from the receipts subject into a receipt the executor signed, or nothing.

    Args:
        key: the executor's ``receipts.pub``; ``None`` believes every well-formed receipt
            (only through :meth:`from_directory` with ``verify=False``).
    """

    def __init__(self, key: Ed25519PublicKey | None) -> None:
        self._key = key

    @classmethod
    def from_directory(cls, public_keys: Path | None, verify: bool = True) -> ReceiptVerifier:
        """The verifier of ``<public_keys>/receipts.pub`` (default ``$EFFECTGATE_PUBLIC_KEYS_DIR``).

        Raises:
            ReceiptKeyMissing: no ``receipts.pub`` there and ``verify``.
            ValueError: ``receipts.pub`` is not a base64 Ed25519 public key.
        """
        directory = public_keys or (Path(found) if (found := os.environ.get("EFFECTGATE_PUBLIC_KEYS_DIR")) else None)
        if directory is not None and (directory / "receipts.pub").exists():
            return cls(load_public_key(directory / "receipts.pub"))
        if verify:
            raise ReceiptKeyMissing(
                "no receipts.pub to verify receipts with: pass public_keys= (effectgate up: .effectgate/keys/public) "
                "or set EFFECTGATE_PUBLIC_KEYS_DIR"
            )
        log.warning("receipts are NOT verified (verify_receipts=False): a forged receipt would be believed")
        return cls(None)

    def verified(self, data: bytes) -> ReceiptIssued | None:
        """The receipt in ``data`` when it is one and its signature verifies; else ``None`` (logged)."""
        try:
            body, issued = msgspec.json.decode(data), decode_untrusted(_receipt, data)
        except msgspec.DecodeError:
            return None
        if self._key is None or (isinstance(body, dict) and verify_body(body, self._key)):
            return issued
        log.warning("receipt for %s ignored: not signed by the executor's receipts key", issued.request_id)
        return None
