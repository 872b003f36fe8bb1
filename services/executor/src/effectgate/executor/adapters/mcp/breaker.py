"""A circuit breaker per MCP server: open after N consecutive faults, one half-open probe after a cool-down."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Breaker", "Circuit"]


class Circuit(StrEnum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class Breaker:
    """Counts consecutive faults of one server's calls.

    Attributes:
        threshold: consecutive faults that open the circuit (at least 1).
        cool_down_s: how long the circuit stays open before one probe is admitted, seconds.
        circuit: the current state.
        faults: consecutive faults so far.
        opened_at: clock reading when the circuit last opened, seconds.
    """

    threshold: int = 5
    cool_down_s: float = 30.0
    circuit: Circuit = Circuit.CLOSED
    faults: int = 0
    opened_at: float = 0.0

    def admit(self, now: float) -> bool:
        """Whether a call may be sent now; an open circuit past its cool-down admits one probe."""
        if self.circuit is Circuit.CLOSED:
            return True
        if self.circuit is Circuit.OPEN and now - self.opened_at >= self.cool_down_s:
            self.circuit = Circuit.HALF_OPEN
            return True
        return False

    def succeeded(self) -> bool:
        """Record a success; return whether the circuit closed because of it."""
        reopened = self.circuit is not Circuit.CLOSED
        self.circuit, self.faults = Circuit.CLOSED, 0
        return reopened

    def faulted(self, now: float) -> bool:
        """Record a fault; return whether the circuit opened because of it."""
        self.faults += 1
        if self.circuit is Circuit.HALF_OPEN or (self.circuit is Circuit.CLOSED and self.faults >= self.threshold):
            self.circuit, self.opened_at = Circuit.OPEN, now
            return True
        return False

    def neutral(self) -> None:
        """Record a call that counts neither way (refused, nothing sent): a probe's place is freed."""
        if self.circuit is Circuit.HALF_OPEN:
            self.circuit = Circuit.OPEN
            self.opened_at -= self.cool_down_s
