"""Errors of the executor."""

from __future__ import annotations

from typing import ClassVar

from effectgate.contracts.errors import EffectgateError, StoreUnavailable

__all__ = [
    "ExecutorError",
    "IdempotencyStoreUnavailable",
    "ToolFailed",
    "ToolOutcomeUnknown",
    "ToolRefused",
    "ToolTimeout",
]


class ExecutorError(EffectgateError):
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
