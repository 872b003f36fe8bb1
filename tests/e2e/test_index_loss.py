"""Redis is an index, the stream the record: a Redis restarted empty loses nothing (guarantees 2 and 3).

This module's redis-server keeps nothing on disk, so every restart is a total loss of
idempotency records, pending approvals and rate limits; the services find their epoch
markers gone and rebuild their indexes from the stream.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

IN_MOVED_TO = 0x80


async def _lose_redis(gate: Any) -> None:
    gate.stack.servers["redis"].restart()


async def _until_pending(gate: Any, request_id: str, timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = await gate.approvals()
        if found := [item for item in listed if item["request_id"] == request_id]:
            return dict(found[0])
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{request_id} is not pending again")


@pytest.mark.parametrize("autonomy", [2, 1], ids=["runs-directly", "needs-approval"])
async def test_the_same_key_after_redis_lost_everything_replays_and_never_runs_again(
    gate: Any, watch: Any, new_id: Any, autonomy: int
) -> None:
    agent, key, name = gate.agent(autonomy), new_id("k"), new_id("once-") + ".txt"
    watch.watch(gate.paths.sandbox)
    arguments = {"path": name, "content": "written once"}
    request_id = await gate.submit(agent, "write", arguments, key=key)
    if autonomy == 1:
        assert (await gate.decide("alice", (await gate.pending(request_id))["approval_id"]))["ok"]
    first = await gate.receipt(agent, request_id)
    assert first.outcome == "succeeded", first.reason
    (gate.paths.sandbox / name).unlink()

    await _lose_redis(gate)
    again = await gate.call(agent, "write", arguments, key=key, timeout_s=60)

    assert (again.outcome, again.replay_of) == ("replayed", first.request_id), again.reason
    assert not (gate.paths.sandbox / name).exists(), "the write ran again after Redis lost its record"
    assert watch.count(name, IN_MOVED_TO) == 1
    assert await gate.count(Subjects.approval("requested", agent, again.request_id)) == 0, "a replay asked again"


async def test_a_pending_approval_survives_redis_losing_everything(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("waiting-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "approved after the loss"})
    before = await gate.pending(request_id)

    await _lose_redis(gate)
    after = await _until_pending(gate, request_id)
    assert (after["approval_id"], after["expires_at"]) == (before["approval_id"], before["expires_at"])

    assert (await gate.decide("alice", after["approval_id"]))["ok"]
    issued = await gate.receipt(agent, request_id)
    assert issued.outcome == "succeeded", issued.reason
    assert (gate.paths.sandbox / name).read_text() == "approved after the loss"


async def test_the_first_calls_after_a_redis_restart_are_served(gate: Any) -> None:
    await _lose_redis(gate)
    agents = [gate.agent() for _ in range(3)]
    issued = await asyncio.gather(*(gate.call(agent, "read", {"path": "hello.txt"}, timeout_s=60) for agent in agents))
    assert [receipt.outcome for receipt in issued] == ["succeeded"] * 3, [r.reason for r in issued]
