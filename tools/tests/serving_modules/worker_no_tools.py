"""A module whose dispatcher serves nothing (a worker refuses it)."""

from __future__ import annotations

import os

import effectgate.tools
from effectgate.contracts.tools.hosting import ServedTool, WorkerAnswer, WorkerCall
from effectgate.tools.answering import Progress


class Empty:
    def served(self) -> tuple[ServedTool, ...]:
        return ()

    async def answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        raise AssertionError("never called")


if os.environ.get("EFFECTGATE_TEST_HELD_FACTORY"):
    effectgate.tools.dispatcher_for_module = lambda module, worker: Empty()  # type: ignore[attr-defined]
