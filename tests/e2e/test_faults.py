"""A killed service delays work and loses none; a killed executor never runs a write twice (guarantees 2 and 3).

The executor cases wait for JetStream's redelivery of the messages the killed process
held (the executor consumers' ack wait, 10 s). Requests whose id starts with ``fphold-``
stop inside their tool call (a fail point) until the executor is killed or stopped,
which is how a test catches a run mid-effect.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from effectgate.cli.stack.readiness import wait_ready
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {"EFFECTGATE_FAILPOINTS": "executor.run=hang@fphold-", "EFFECTGATE_EXECUTOR_SHUTDOWN_GRACE_S": "2"}


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


async def _known_tool(gate: Any, count: int, autonomy: int = 1) -> None:
    """Let the next agents' clients look the tool up while the policy answers (they seal from it later)."""
    taken = dict(gate._taken)
    for _ in range(0, count, PER_AGENT):
        await (await gate.client(gate.agent(autonomy))).describe("file_system")
    gate._taken = taken


async def test_requests_submitted_while_policy_is_dead_all_end(gate: Any) -> None:
    await _known_tool(gate, 20)
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


async def _held(gate: Any, new_id: Any, operation: str, autonomy: int) -> tuple[str, str, str]:
    """A call stopped inside its tool call: its claim is made (a write's is in the stream)."""
    agent, request_id, name = gate.agent(autonomy), new_id("fphold-"), new_id("held-") + ".txt"
    arguments = {"path": name, "content": "x"} if operation == "write" else {"path": "hello.txt"}
    await wait_ready(gate.stack, ("executor",))
    client = await gate.client(agent)
    await client.submit("file_system", operation, arguments, request_id=request_id)
    for _ in range(100):
        held = await gate.js.consumer_info("EFFECTGATE", catalog.EXECUTOR_DECISIONS.durable)
        claimed = operation != "write" or await gate.count(f"tg.claim.{agent}.*") == 1
        if held.num_ack_pending >= 1 and claimed:
            return agent, request_id, name
        await asyncio.sleep(0.1)
    raise TimeoutError("the call never reached its tool")


@pytest.mark.timeout(120)
async def test_a_write_whose_executor_is_killed_mid_run_ends_uncertain_within_seconds(gate: Any, new_id: Any) -> None:
    agent, request_id, name = await _held(gate, new_id, "write", 2)
    gate.stack.stop("executor", kill=True)
    killed = time.monotonic()
    gate.stack.start("executor")
    issued = await gate.receipt(agent, request_id, timeout_s=60)
    waited = time.monotonic() - killed
    assert (issued.outcome, issued.reason_code) == ("uncertain", "execution_interrupted"), issued.reason
    # the tool's timeout (10 s) plus the stale grace (30 s) would be 40 s: a dead owner is known sooner
    assert waited < 25, f"the receipt took {waited:.1f}s after the kill"
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
    assert not (gate.paths.sandbox / name).exists()


@pytest.mark.parametrize(("operation", "autonomy", "outcome"), [("write", 2, "uncertain"), ("read", 1, "failed")])
async def test_sigterm_mid_run_ends_the_call_before_the_executor_exits(
    gate: Any, new_id: Any, operation: str, autonomy: int, outcome: str
) -> None:
    agent, request_id, _ = await _held(gate, new_id, operation, autonomy)
    gate.stack.stop("executor")  # SIGTERM: a 2 s grace, then what still runs is ended
    try:
        stored = await gate.js.get_last_msg("EFFECTGATE", Subjects.receipt(agent, request_id))
    finally:
        gate.stack.start("executor")
    issued = await gate.receipt(agent, request_id)
    assert stored.seq and (issued.outcome, issued.reason_code) == (outcome, "executor_shutdown"), issued.reason
