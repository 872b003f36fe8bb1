"""Errors of the executor.

Every error carries a machine-readable ``reason_code`` (snake_case, stable, put on
receipts) and a human ``reason`` (one sentence, no secret, no host path)::

    ExecutorError               reason_code, reason, transient
    ├── ToolRefused             refused before any effect: hostile path, bad argument
    │                           (path_outside_sandbox, not_found, too_large, not_a_file,
    │                           not_a_directory, invalid_argument, unknown_operation, …)
    │                           + argument: the offending argument's name, if any
    ├── ToolFailed              the tool answered that it failed (tool_error, server_unavailable, …)
    ├── ToolOutcomeUnknown      the call was sent and no definitive answer came back
    │                           (connection_lost, output_invalid, …): the effect may exist
    ├── ToolTimeout             the tool did not finish within its timeout_s (tool_timeout)
    ├── IdempotencyStoreUnavailable        a state store (Redis) is unreachable or too slow;
    │                           transient: retry later, never run the tool without it
    │                           (idempotency_store_unavailable)
    └── IndexLost               the idempotency index lost its state (Redis restarted
                                empty); transient: rebuilt from the stream, then retried
                                (idempotency_index_rebuilding)

A refusal is the caller's fault and final, nothing ran. A failure is the tool's own
definitive answer (or a start that never reached it). An unknown outcome or a timeout
means the call was sent and nobody knows what it did: a write then ends ``uncertain``,
never ``failed``, so an agent told "failed" never retries an effect that happened.
``transient`` errors say nothing about the request and the same request may be retried.
"""

from __future__ import annotations

from typing import ClassVar

from toolgate.contracts.errors import StoreUnavailable, ToolgateError

__all__ = [
    "ExecutorError",
    "IndexLost",
    "IdempotencyStoreUnavailable",
    "ToolFailed",
    "ToolOutcomeUnknown",
    "ToolRefused",
    "ToolTimeout",
]


class ExecutorError(ToolgateError):
    """Root of the executor's errors.

    Attributes:
        reason_code: stable snake_case code, e.g. ``"path_outside_sandbox"``.
        reason: one human sentence naming what was wrong.
        transient: class-level; True when retrying the same request may succeed.
    """

    transient: ClassVar[bool] = False
    default_code: ClassVar[str] = "executor_error"

    def __init__(self, reason_code: str | None = None, reason: str = "") -> None:
        code = reason_code or self.default_code
        super().__init__(code, reason or code.replace("_", " "))


class ToolRefused(ExecutorError):
    """The call was refused before any effect (hostile path, bad argument).

    Attributes:
        argument: name of the offending argument (e.g. ``"path"``), or None.
    """

    default_code = "refused"

    def __init__(self, reason_code: str | None = None, reason: str = "", *, argument: str | None = None) -> None:
        super().__init__(reason_code, reason)
        self.argument = argument


class ToolFailed(ExecutorError):
    """The tool answered that it failed, or could not be reached at all (nothing was sent)."""

    default_code = "tool_error"


class ToolOutcomeUnknown(ExecutorError):
    """The call reached the tool and no definitive answer came back.

    Connection lost or server killed during the call, a malformed reply, a result that
    breaks the protocol: whether the effect happened is unknown.
    """

    default_code = "outcome_unknown"


class ToolTimeout(ExecutorError):
    """The tool did not finish within the descriptor's ``timeout_s``."""

    default_code = "tool_timeout"


class IdempotencyStoreUnavailable(ExecutorError, StoreUnavailable):
    """A state store (Redis) was unreachable or timed out; transient, fail closed."""

    transient = True
    default_code = "store_unavailable"


class IndexLost(ExecutorError):
    """The idempotency index has no epoch marker: Redis lost its state; rebuild, then retry."""

    transient = True
    default_code = "idempotency_index_rebuilding"
