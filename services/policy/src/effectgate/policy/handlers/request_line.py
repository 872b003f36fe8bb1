"""The policy's line per request (:mod:`effectgate.shared.consumer.request_log`): the decision it published.

Fields: ``request_id``, ``principal``, ``tool``, ``operation``, ``verdict``, ``reason_code``;
``stored=False`` for a decision not stored (the request had one already); for a tool or
operation the policy hides from the principal, ``hidden_reason_code`` (what the policy said;
the agent is told ``reason_code``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from effectgate.contracts.events import DecisionMade, decode_untrusted
from effectgate.shared.consumer.request_log import note

__all__ = ["note_decision"]


class _Asked(msgspec.Struct):
    """What a request body names, read leniently (any shape)."""

    tool: Any = None
    operation: Any = None


_asked = msgspec.json.Decoder(_Asked)
MAX_READ_BYTES = 65536
"""A body larger than this is not read again for its names, bytes (it ended as oversized)."""


def _named(data: bytes) -> tuple[str | None, str | None]:
    """The tool and operation ``data`` names, ``None`` for what it does not name as a string."""
    if len(data) > MAX_READ_BYTES:
        return None, None
    try:
        asked = decode_untrusted(_asked, data)
    except msgspec.DecodeError:
        return None, None
    tool, operation = asked.tool, asked.operation
    return tool if isinstance(tool, str) else None, operation if isinstance(operation, str) else None


def note_decision(decision: DecisionMade, data: bytes, stored: bool = True) -> None:
    """Note ``decision``, made on the request body ``data``, as this message's request line.

    ``stored``: ``False`` when the request already had a decision (a redelivery): the line says
    ``stored=False`` (the earlier decision stands).
    """
    resolved = decision.request
    tool, operation = (resolved.tool, resolved.operation) if resolved else _named(data)
    note(
        "decision",
        request_id=decision.request_id,
        principal=decision.principal,
        tool=tool,
        operation=operation,
        verdict=decision.verdict,
        reason_code=decision.reason_code,
        hidden_reason_code=decision.hidden_reason_code,
        stored=None if stored else False,
    )
