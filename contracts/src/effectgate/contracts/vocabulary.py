"""The field's standard terms as closed enumerations.

Every service speaks these names on the wire (their string values) and in code.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Outcome", "RiskTier", "SideEffectClass", "Verdict"]


class SideEffectClass(StrEnum):
    """What a tool operation may change in the world, from least to most dangerous."""

    READ_ONLY = "READ_ONLY"
    REVERSIBLE_WRITE = "REVERSIBLE_WRITE"
    IRREVERSIBLE_WRITE = "IRREVERSIBLE_WRITE"
    PRODUCTION = "PRODUCTION"
    FINANCIAL = "FINANCIAL"
    SECURITY_SENSITIVE = "SECURITY_SENSITIVE"

    @property
    def rank(self) -> int:
        """Position in the declared order: 0 for READ_ONLY up to 5."""
        return list(SideEffectClass).index(self)


class RiskTier(StrEnum):
    """How much harm a misuse of the operation can do, Trivial to Critical."""

    TRIVIAL = "trivial"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """Position in the declared order: 0 for trivial up to 4 for critical."""
        return list(RiskTier).index(self)


class Verdict(StrEnum):
    """What the policy service decided for one tool request."""

    EXECUTE = "execute"
    NEEDS_APPROVAL = "needs_approval"
    DENY = "deny"
    REFUSE = "refuse"
    """The request itself was invalid (malformed, oversized, schema-invalid)."""


class Outcome(StrEnum):
    """How a tool request ended, as stated by its receipt."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DENIED = "denied"
    REFUSED = "refused"
    UNCERTAIN = "uncertain"
    REPLAYED = "replayed"
