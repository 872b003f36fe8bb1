"""Whether a tool can be called now: its state, kept apart from its immutable descriptor versions."""

from __future__ import annotations

from datetime import datetime

import msgspec

__all__ = ["STATES", "ToolState", "blocks"]

STATES = ("starting", "ready", "unavailable", "degraded")


class ToolState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where one tool stands.

    Attributes:
        state: one of :data:`STATES`.
        reason: why (names the server and its fault; scrubbed of secrets by the executor).
        since: when it entered this state, UTC.
        probe_at: ``degraded`` only: when a probe call will be let through, UTC.
    """

    state: str
    reason: str = ""
    since: datetime
    probe_at: datetime | None = None


def blocks(state: ToolState | None, now: datetime) -> bool:
    """Whether a call to a tool in ``state`` ends ``tool_unavailable`` without running anything.

    ``unavailable`` blocks; ``degraded`` blocks until ``probe_at`` (then calls reach the
    executor, which admits one probe and refuses the rest); no state, ``starting`` and
    ``ready`` do not (the executor still refuses a call its server cannot take).
    """
    if state is None or state.state not in ("unavailable", "degraded"):
        return False
    return state.state == "unavailable" or state.probe_at is None or now < state.probe_at
