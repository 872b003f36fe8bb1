"""What a tool raises to say how a call ended, and what the tools API refuses at declaration.

A tool raises :class:`Refusal` (nothing ran; the answer is ``refused``, never retried) or
:class:`Fault` (it did not do its effect; ``failed``, retried only when ``retryable``). Any other
exception is ``failed`` for a ``READ_ONLY`` operation and ``uncertain`` for a write
(``docs/reference/tools-api.md``, "Errors and receipts").
"""

from __future__ import annotations

from effectgate.contracts.errors import Problem

__all__ = ["DeclarationError", "Fault", "Refusal", "RuleRefused", "RuleViolation"]


class Refusal(Problem):
    """The tool refused the call before doing anything: answered ``refused`` with ``code``.

    Args:
        code: the machine-readable reason (snake_case, e.g. ``insufficient_funds``).
        reason: what was wrong, for the caller.
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.reason_code = code


class Fault(Problem):
    """The tool did not do its effect: answered ``failed`` with ``code``.

    Args:
        code: the machine-readable reason (matched by a retry policy's ``on``).
        reason: what went wrong.
        retryable: a transient fault the operation's retry policy may retry.
    """

    def __init__(self, code: str, reason: str, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason_code = code
        self.retryable = retryable


class DeclarationError(Problem):
    """A tool's declaration cannot be served: a missing or contradictory option, an unusable type.

    The message names the tool, the operation (when one) and the option.
    """


class RuleViolation(Problem):
    """Raised by a start-up rule (:mod:`effectgate.tools.rules`) for one declared operation.

    Args:
        field: the option or name the rule refuses (``name``, ``reconcile`` …).
        reason: why.
    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


class RuleRefused(Problem):
    """A host's rule refused a declared tool: names the tool, the operation, the rule and the field."""

    def __init__(self, tool: str, operation: str, rule: str, violation: RuleViolation) -> None:
        super().__init__(f"{tool}.{operation}: rule {rule!r} refuses {violation.field}: {violation.reason}")
        self.tool, self.operation, self.rule, self.field = tool, operation, rule, violation.field
