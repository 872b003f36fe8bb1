"""Canonical JSON and the hashes built on it.

Canonical form is RFC 8785 (JSON Canonicalization Scheme), produced by the
``rfc8785`` package; hashes are SHA-256 rendered as ``sha256:<hex>``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

__all__ = ["canonical_bytes", "sha256_hex"]


def canonical_bytes(value: Any) -> bytes:
    """Return the RFC 8785 canonical JSON bytes of a JSON-compatible ``value``.

    Raises:
        rfc8785.CanonicalizationError: ``value`` holds something JSON cannot
            represent canonically (NaN, an integer beyond IEEE 754 range, …).
    """
    return rfc8785.dumps(value)


def sha256_hex(value: Any) -> str:
    """Return ``sha256:<64 hex>`` of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_bytes(value)).hexdigest()
