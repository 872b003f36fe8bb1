"""Two replicas of a periodic task under one lease (real NATS KV): which of them ran it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import LEASES_BUCKET
from effectgate.shared.runtime.leadership import Leadership

__all__ = ["Periodic", "runs_of_two_replicas"]

Periodic = Callable[[list[str], str, Leadership], Coroutine[Any, Any, None]]
"""A replica's loop: ``(ran, name, lease)``; it appends ``name`` to ``ran`` each time it does its work."""


async def runs_of_two_replicas(js: JetStreamContext, lease: str, periodic: Periodic, run_s: float = 0.6) -> list[str]:
    """The names appended while replicas ``one`` (holding ``lease``) and ``two`` ran ``periodic`` for ``run_s`` s.

    Raises:
        AssertionError: ``one`` did not take the lease ``lease``, or ``two`` took it too.
    """
    kv = await js.key_value(LEASES_BUCKET)
    holder, standby = Leadership(kv, lease, "one"), Leadership(kv, lease, "two")
    assert await holder.step() and not await standby.step()
    ran: list[str] = []
    tasks = [asyncio.create_task(periodic(ran, name, held)) for name, held in (("one", holder), ("two", standby))]
    await asyncio.sleep(run_s)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return ran
