"""Approval ids: the name of the approval a request opens, known to the requester as well.

Pure. The approvals service names the approval a ``needs_approval`` decision opens
:func:`approval_id_for` its principal and request id, so a redelivered decision opens the same
approval, and a client that submitted the request can name its approval (``pending approval
ap-…``) without asking anyone.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

__all__ = ["APPROVAL_ID", "approval_id_for"]

APPROVAL_ID: Final = re.compile(r"^ap-[0-9a-f]{12}\Z")
"""What :func:`approval_id_for` returns: ``ap-`` and 12 lowercase hex digits."""


def approval_id_for(principal: str, request_id: str) -> str:
    """The approval id ``ap-<12 hex>`` of the approval ``request_id`` of ``principal`` opens.

    Args:
        principal: the requesting principal (a subject token).
        request_id: the request's id (a subject token).

    Returns:
        ``ap-`` and the first 12 hex digits of SHA-256 of ``<principal>/<request_id>`` (UTF-8).
    """
    return "ap-" + hashlib.sha256(f"{principal}/{request_id}".encode()).hexdigest()[:12]
