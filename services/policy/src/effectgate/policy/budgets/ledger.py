"""The spend ledger's rules: budget counters and each charged request's record, and their keys."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from effectgate.contracts.rpc.policy import BudgetCounter, Held

__all__ = [
    "BudgetCounter",
    "Charge",
    "Exceeded",
    "Held",
    "OPEN",
    "RecordState",
    "counter_key",
    "record_key",
]


class RecordState(StrEnum):
    """Where one charged request stands (see the module's table)."""

    RESERVED = "reserved"
    UNCERTAIN = "uncertain"
    COMMITTED = "committed"
    RELEASED = "released"
    ENDED = "ended"


OPEN = (RecordState.RESERVED, RecordState.UNCERTAIN)
"""States whose units are in ``reserved``."""


@dataclass(frozen=True, slots=True)
class Charge:
    """One counter a request is charged in.

    Attributes:
        budget: the budget's name.
        start_s: the window's start, Unix seconds.
        window_s: the window's length, seconds.
        limit_units: the budget's limit, units.
        expires_at_s: when the counter (and its records) may be forgotten, Unix seconds.
    """

    budget: str
    start_s: int
    window_s: int
    limit_units: int
    expires_at_s: int


@dataclass(frozen=True, slots=True)
class Exceeded:
    """The call does not fit ``budget``: ``used + reserved + cost > limit``.

    Attributes:
        charge: the counter it does not fit in.
        used_units / reserved_units: the counter before this call.
    """

    charge: Charge
    used_units: int
    reserved_units: int


def counter_key(principal: str, budget: str, start_s: int) -> str:
    """``tg:budget:{<principal>}:c:<budget>:<window start>`` (hash tag: one Redis Cluster slot per principal)."""
    return f"tg:budget:{{{principal}}}:c:{budget}:{start_s}"


def record_key(principal: str, request_id: str) -> str:
    """``tg:budget:{<principal>}:r:<request id>``: the record of one charged request."""
    return f"tg:budget:{{{principal}}}:r:{request_id}"
