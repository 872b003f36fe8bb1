"""What a tool worker's bus edge needs from the tools it serves (implemented by the dispatcher)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from effectgate.contracts.tools.hosting import ServedTool, WorkerAnswer, WorkerCall

__all__ = ["Answering", "Progress"]

Progress = Callable[[int, str], Awaitable[None]]
"""Called by a streaming operation's run with ``(items so far, message)``."""


class Answering(Protocol):
    """Answers verified :class:`WorkerCall` s; never raises for what a tool does."""

    def served(self) -> tuple[ServedTool, ...]:
        """Every tool served, with the digest of the descriptor its declaration generates."""
        ...

    async def answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        """Run ``call`` (its signature already checked by the caller) and say how it ended.

        A call whose ``descriptor_digest`` differs from the declaration's is refused
        ``descriptor_mismatch`` without running; arguments the input schema refuses are refused
        ``invalid_arguments``; a tool's :class:`effectgate.tools.Refusal` is ``refused``; a
        :class:`effectgate.tools.Fault` is ``failed`` (``retryable`` as it says); any other error is
        ``failed`` for a ``READ_ONLY`` operation and ``uncertain`` for a write.
        """
        ...
