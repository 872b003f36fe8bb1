"""A killed service delays work and loses none; a killed executor never runs a write twice (guarantees 2 and 3).

The executor case waits for JetStream's redelivery of the messages the killed process
held (the consumers' ack wait, 60 s), so it takes about a minute.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolgate.shared.catalog import Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

IN_MOVED_TO = 0x80
PER_AGENT = 5
"""The file_system rate limit: 5 calls per 60 s per principal."""


async def _submit_reads(gate: Any, count: int) -> list[tuple[str, str]]:
    submitted = []
    for index in range(count):
        if index % PER_AGENT == 0:
            agent = gate.agent()
        submitted.append((agent, await gate.submit(agent, "read", {"path": "hello.txt"})))
    return submitted


async def _submit_writes(gate: Any, names: list[str]) -> list[tuple[str, str]]:
    submitted = []
    for index, name in enumerate(names):
        if index % PER_AGENT == 0:
            agent = gate.agent(2)
        submitted.append((agent, await gate.submit(agent, "write", {"path": name, "content": name})))
    return submitted


async def test_requests_submitted_while_policy_is_dead_all_end(gate: Any) -> None:
    gate.stack.stop("policy", kill=True)
    try:
        submitted = await _submit_reads(gate, 20)
        await asyncio.sleep(0.5)
        assert await gate.count(Subjects.DECISIONS) == 0, "something decided while the policy was dead"
    finally:
        gate.stack.start("policy")

    receipts = [await gate.receipt(agent, request_id, timeout_s=60) for agent, request_id in submitted]
    assert [issued.outcome for issued in receipts] == ["succeeded"] * 20
    for agent, request_id in submitted:
        assert await gate.count(Subjects.receipt(agent, request_id)) == 1


@pytest.mark.timeout(240)
async def test_executor_killed_in_flight_loses_nothing_and_runs_no_write_twice(
    gate: Any, watch: Any, new_id: Any
) -> None:
    watch.watch(gate.paths.sandbox)
    names = [new_id("crash-") + ".txt" for _ in range(10)]
    gate.stack.stop("executor", kill=True)
    decided_before = await gate.count(Subjects.DECISIONS)
    reads = await _submit_reads(gate, 20)
    writes = await _submit_writes(gate, names)
    await _decided(gate, decided_before + len(reads) + len(writes))

    first_receipt = asyncio.Event()

    async def kill_on_first_receipt(_msg: Any) -> None:
        if not first_receipt.is_set():
            gate.stack.stop("executor", kill=True)
            first_receipt.set()

    subscription = await gate.nc.subscribe(Subjects.RECEIPTS, cb=kill_on_first_receipt)
    gate.stack.start("executor")
    await asyncio.wait_for(first_receipt.wait(), 30)
    await subscription.unsubscribe()
    ended_before_restart = sum([await gate.count(Subjects.receipt(a, r)) for a, r in reads + writes])
    assert ended_before_restart < len(reads) + len(writes), "the executor finished everything before the kill"
    gate.stack.start("executor")

    read_receipts = [await gate.receipt(agent, rid, timeout_s=150) for agent, rid in reads]
    write_receipts = [await gate.receipt(agent, rid, timeout_s=150) for agent, rid in writes]
    await gate.settle(timeout_s=60)

    assert {issued.outcome for issued in read_receipts} == {"succeeded"}
    for name, issued in zip(names, write_receipts, strict=True):
        runs = watch.count(name, IN_MOVED_TO)
        assert issued.outcome in ("succeeded", "uncertain"), (name, issued.outcome, issued.reason)
        assert runs <= 1, f"{name} was written {runs} times"
        if issued.outcome == "succeeded":
            assert runs == 1 and (gate.paths.sandbox / name).read_text() == name
    for agent, request_id in reads + writes:
        assert await gate.count(Subjects.receipt(agent, request_id)) == 1


async def _decided(gate: Any, count: int, timeout_s: float = 30.0) -> None:
    """Wait until the policy has published a decision for every submitted request."""
    for _ in range(int(timeout_s * 10)):
        if await gate.count(Subjects.DECISIONS) >= count:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"fewer than {count} decisions after {timeout_s}s")
