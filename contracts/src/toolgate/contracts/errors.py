"""The root of every toolgate error: a machine-readable code and a human reason.

::

    ToolgateError(reason_code, reason)
    ├── toolgate.policy.errors.PolicyError
    ├── toolgate.approvals.errors.ApprovalsError
    ├── toolgate.registry.errors.RegistryError
    ├── toolgate.executor.errors.ExecutorError
    └── toolgate.audit.errors.AuditError
"""

from __future__ import annotations

__all__ = ["ToolgateError"]


class ToolgateError(Exception):
    """An error that can be told to the caller as a refusal.

    Attributes:
        reason_code: machine-readable reason, e.g. ``schema_invalid``.
        reason: human-readable reason naming what was wrong.
    """

    def __init__(self, reason_code: str, reason: str) -> None:
        super().__init__(f"{reason_code}: {reason}")
        self.reason_code = reason_code
        self.reason = reason
