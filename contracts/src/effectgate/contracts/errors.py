"""The root of every effectgate error: a machine-readable code and a human reason."""

from __future__ import annotations

import asyncio
import re
from typing import Any, ClassVar

__all__ = ["EffectgateError", "IndexLost", "NatsUnreachable", "Problem", "StoreUnavailable", "described"]

_MEANINGS: tuple[tuple[type[BaseException], str], ...] = (
    (TimeoutError, "timed out"),
    (asyncio.CancelledError, "cancelled"),
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (BrokenPipeError, "connection closed while writing"),
    (ConnectionError, "connection lost"),
    (EOFError, "ended before its end"),
    (asyncio.IncompleteReadError, "ended before its end"),
    (KeyboardInterrupt, "interrupted"),
    (MemoryError, "out of memory"),
)
"""What an error says when its text is empty (the first class it is an instance of)."""


def described(error: BaseException) -> str:
    """The text of ``error``, never empty: ``str(error)``, else what its class means.

    ``TimeoutError()``, ``CancelledError()`` and many library errors have an empty ``str``;
    a log line or a refusal built from that would end in nothing (``TimeoutError: ``). An
    empty one is described by its class: ``timed out``, ``cancelled``, ``connection lost`` …,
    else ``<Type> (no message)``. An exception group is described by its first error.
    """
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip()
    if text:
        return text
    meaning = next((said for kind, said in _MEANINGS if isinstance(error, kind)), None)
    return meaning or f"{type(error).__name__} (no message)"


class EffectgateError(Exception):
    """An error that can be told to the caller as a refusal.

    Attributes:
        reason_code: machine-readable reason, e.g. ``schema_invalid``.
        reason: human-readable reason naming what was wrong.
    """

    def __init__(self, reason_code: str, reason: str) -> None:
        super().__init__(f"{reason_code}: {reason}")
        self.reason_code = reason_code
        self.reason = reason


class Problem(EffectgateError):
    """An effectgate error told by its message alone; ``str()`` is that message.

    Subclasses name their reason code in ``code`` (snake_case, e.g. ``credentials_invalid``).

    Args:
        reason: what was wrong (anything printable; ``str()`` of it is kept).
    """

    code: ClassVar[str] = "effectgate_error"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Name a subclass's code after it (``CredentialsInvalid`` → ``credentials_invalid``) unless it names one."""
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            cls.code = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()

    def __init__(self, reason: object = "") -> None:
        super().__init__(self.code, str(reason))
        self.args = (reason,) if reason != "" else ()


class StoreUnavailable(EffectgateError):
    """A state store (Redis) could not answer or timed out: transient, and the caller fails closed."""


class IndexLost(StoreUnavailable):
    """A store's index has no epoch marker: it lost its state (Redis restarted empty).

    Transient: the index is being rebuilt from its stream and the same request is retried
    once it is; never read as "nothing recorded". Raised by the idempotency index (the
    executor's, read by the policy too) and by the approval store.

    Args:
        reason_code: which index, ``idempotency_index_rebuilding`` unless given
            (the approval store's is ``approval_store_rebuilding``).
        reason: the human sentence.
    """

    transient: ClassVar[bool] = True

    def __init__(
        self,
        reason_code: str = "idempotency_index_rebuilding",
        reason: str = "the idempotency index is being rebuilt from the stream",
    ) -> None:
        super().__init__(reason_code, reason)


class NatsUnreachable(Problem):
    """The NATS server could not be reached (the message hides URL credentials)."""
