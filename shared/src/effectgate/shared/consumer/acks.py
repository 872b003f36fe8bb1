"""What a handler tells JetStream about a message, decided without any broker import."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Later", "Settle", "Settlement"]


class Settle(Enum):
    """What to tell JetStream about a handled message."""

    ACK = "ack"
    """Handled (a refusal is a value: handled too). Never delivered again."""
    RETRY = "retry"
    """A transient fault: deliver again after a short delay; on the last delivery the
    consumer's give-up ends the request instead."""
    TERM = "term"
    """Undecodable or forged: never deliver again (the stream and the audit keep it)."""


@dataclass(frozen=True, slots=True)
class Later:
    """Not a fault: look at this message again in ``delay_s`` seconds (e.g. a run still in flight).

    Attributes:
        delay_s: seconds until the next delivery.
    """

    delay_s: float


Settlement = Settle | Later
"""Everything a handler may answer."""
