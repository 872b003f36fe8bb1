"""A fake dispatcher for the worker's tests: ``echo`` answers at once, ``held`` waits until released.

Imported as the module a worker process serves, it puts its own factory in place of
``effectgate.tools.dispatcher_for_module``, so the process serves this fake.
"""

from __future__ import annotations

import asyncio
import os

import effectgate.tools
from effectgate.contracts.tools.hosting import ServedTool, WorkerAnswer, WorkerCall
from effectgate.tools.answering import Progress

TOOLS = (
    ServedTool(tool="echo", version="1.0.0", digest="e" * 64),
    ServedTool(tool="held", version="1.0.0", digest="h" * 64),
)


class Held:
    """Answers ``echo`` with its arguments; ``held`` says progress 1 (it started), then waits for :meth:`release`."""

    def __init__(self) -> None:
        self.calls: list[WorkerCall] = []
        self.finished: list[str] = []
        self._released = asyncio.Event()

    def served(self) -> tuple[ServedTool, ...]:
        return TOOLS

    async def answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        self.calls.append(call)
        if call.tool == "held":
            await progress(1, "started")
            await self._released.wait()
        self.finished.append(call.call_id)
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result=call.arguments, effect_id=f"fx-{call.call_id}")

    def release(self) -> None:
        self._released.set()


def _factory(module: str, worker: str) -> Held:
    return Held()


if os.environ.get("EFFECTGATE_TEST_HELD_FACTORY"):
    effectgate.tools.dispatcher_for_module = _factory  # type: ignore[attr-defined]
