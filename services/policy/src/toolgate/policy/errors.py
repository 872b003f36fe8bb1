"""Errors of the policy service.

Every error carries a machine-readable ``reason_code`` and a human ``reason``; the
service turns either into a ``deny`` decision with that reason (guarantee 1, docs/architecture.md: fail
closed), never into an execution.

::

    PolicyError(reason_code, reason)
    ├── PolicyInvalid        reason_code="policy_invalid"
    │                        the policy or principal directory is missing, unreadable,
    │                        unparsable or fails Cedar schema validation
    ├── LimiterUnavailable   reason_code="rate_limiter_unavailable"
    │                        the rate limiter's store (Redis) failed or timed out
    ├── IndexLost            reason_code="idempotency_index_rebuilding"
    │                        the idempotency index lost its state (Redis restarted
    │                        empty) and is being rebuilt from the stream: transient
    └── BudgetUnavailable    reason_code="budget_unavailable"
        │                    the spend ledger's store (Redis) failed or timed out
        └── BudgetsLost      the ledger has no epoch marker: it lost its state and is
                             being rebuilt from the stream (transient)
"""

from __future__ import annotations

from toolgate.contracts.errors import ToolgateError

__all__ = ["BudgetUnavailable", "BudgetsLost", "IndexLost", "LimiterUnavailable", "PolicyError", "PolicyInvalid"]


class PolicyError(ToolgateError):
    """Root of the policy service's errors."""


class PolicyInvalid(PolicyError):
    """The policy or the principal directory cannot be used.

    Attributes:
        path: the offending file, when the error came from reading one.
        problems: each problem of a policy text, ``<line>:<column>: <message>`` in file
            order (:mod:`toolgate.policy.validation`); empty when the reason is one sentence.
    """

    def __init__(
        self,
        reason: str,
        *,
        reason_code: str = "policy_invalid",
        path: str | None = None,
        problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(reason_code, reason)
        self.path, self.problems = path, problems


class LimiterUnavailable(PolicyError):
    """The rate limiter could not answer (store down, timeout, protocol error)."""

    def __init__(self, reason: str, *, reason_code: str = "rate_limiter_unavailable") -> None:
        super().__init__(reason_code, reason)


class IndexLost(PolicyError):
    """The idempotency index has no epoch marker: it lost its state and is being rebuilt."""

    def __init__(self) -> None:
        super().__init__("idempotency_index_rebuilding", "the idempotency index is being rebuilt from the stream")


class BudgetUnavailable(PolicyError):
    """The spend ledger could not answer (store down, timeout, protocol error)."""

    def __init__(self, reason: str, *, reason_code: str = "budget_unavailable") -> None:
        super().__init__(reason_code, reason)


class BudgetsLost(BudgetUnavailable):
    """The spend ledger has no epoch marker: it lost its state and is being rebuilt from the stream."""

    def __init__(self) -> None:
        super().__init__("the spend budgets are being rebuilt from the stream (their store lost its state)")
