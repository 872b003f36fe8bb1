"""Errors of the policy service.

Every error carries a machine-readable ``reason_code`` and a human ``reason``; the
service turns either into a ``deny`` decision with that reason (guarantee 1, docs/explanation/architecture.md:
fail closed), never into an execution.
"""

from __future__ import annotations

from effectgate.contracts.errors import EffectgateError

__all__ = ["BudgetUnavailable", "BudgetsLost", "LimiterUnavailable", "PolicyError", "PolicyInvalid"]


class PolicyError(EffectgateError):
    """Root of the policy service's errors."""


class PolicyInvalid(PolicyError):
    """The policy or the principal directory cannot be used.

    Attributes:
        path: the offending file, when the error came from reading one.
        problems: each problem of a policy text, ``<line>:<column>: <message>`` in file
            order (:mod:`effectgate.policy.cedar.validation`); empty when the reason is one sentence.
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


class BudgetUnavailable(PolicyError):
    """The spend ledger could not answer (store down, timeout, protocol error)."""

    def __init__(self, reason: str, *, reason_code: str = "budget_unavailable") -> None:
        super().__init__(reason_code, reason)


class BudgetsLost(BudgetUnavailable):
    """The spend ledger has no epoch marker: it lost its state and is being rebuilt from the stream."""

    def __init__(self) -> None:
        super().__init__("the spend budgets are being rebuilt from the stream (their store lost its state)")
