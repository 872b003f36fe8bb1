"""When a Python tool's call is tried again, and after how long (pure).

Only where a second call cannot do the effect twice: a ``READ_ONLY`` operation, or a write
declared ``idempotent_at_target`` (the target itself refuses a duplicate). Any other write is
called once, whatever retry policy it declares; a refusal is never retried.
"""

from __future__ import annotations

from effectgate.contracts.errors import EffectgateError
from effectgate.contracts.tools.descriptors import OperationSpec, RetryPolicy
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.executor.errors import ExecutorError

__all__ = ["Transient", "backoff_s", "retry_policy", "retries"]


class Transient(EffectgateError):
    """An attempt that did not do its effect, or may not have: the retry loop decides what follows.

    Never leaves the Python tool host (which raises ``error`` in its place).

    Attributes:
        code: the fault's code, matched against the policy's ``on``.
        error: what the call ends with if it is not tried again.
        unknown: whether the attempt may have done its effect (no answer, an unreadable answer).
    """

    def __init__(self, code: str, error: ExecutorError, unknown: bool = False) -> None:
        super().__init__(code, error.reason)
        self.code, self.error, self.unknown = code, error, unknown


def retry_policy(spec: OperationSpec) -> RetryPolicy | None:
    """The policy ``spec``'s calls are retried under; ``None``: one call only (any other write)."""
    if spec.retry is None:
        return None
    if spec.side_effect_class is SideEffectClass.READ_ONLY or spec.idempotent_at_target:
        return spec.retry
    return None


def retries(policy: RetryPolicy | None, code: str, attempt: int) -> bool:
    """Whether a transient fault ``code`` of call number ``attempt`` (1-based) is tried again."""
    if policy is None or attempt >= policy.attempts:
        return False
    return not policy.on or code in policy.on


def backoff_s(policy: RetryPolicy, attempt: int) -> float:
    """The wait after call ``attempt`` failed, seconds: ``backoff_s`` doubled per call, at most ``max_backoff_s``."""
    return float(min(policy.backoff_s * 2 ** (attempt - 1), policy.max_backoff_s))
