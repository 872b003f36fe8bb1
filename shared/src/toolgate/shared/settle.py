"""What a handler tells JetStream about a message, decided without any broker import."""

from __future__ import annotations

from enum import Enum

__all__ = ["Settle"]


class Settle(Enum):
    """What to tell JetStream about a handled message."""

    ACK = "ack"
    RETRY = "retry"
    TERM = "term"
