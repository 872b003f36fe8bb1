"""Every service as two replicas: work shared, each request ending once, one audit chain whoever writes it.

Policy, executor and approvals share their durable consumers (and answer RPCs in queue groups):
each request still ends in exactly one receipt. The executor's backstop is a shared durable
consumer too: two replicas end a stale request once. The audit replicas share one database and
only the holder of the ``audit-writer`` lease appends, with its fencing token: a writer killed
or stopped mid-run leaves one chain, in stream order, without a gap or a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import LEASE_TTL_S, LEASES_BUCKET, Leases, Rpc, Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

TAKEOVER_S = LEASE_TTL_S + LEASE_TTL_S / 3 + 2
"""The bound the docs state for a standby to take the writer's lease (TTL, one renewal, slack)."""


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {
        "EFFECTGATE_FAILPOINTS": "policy.decide=hang@stale-",
        "EFFECTGATE_EXECUTOR_BACKSTOP_UNDECIDED_S": "6",
        "EFFECTGATE_EXECUTOR_BACKSTOP_MARGIN_S": "3",
    }


def _request(request_id: str) -> bytes:
    return json.dumps(
        {
            "type": "tool.requested",
            "event_id": request_id,
            "occurred_at": datetime.now(UTC).isoformat(),
            "request_id": request_id,
            "tool": "file_system",
            "operation": "read",
            "arguments": {"path": "hello.txt"},
            "idempotency_key": request_id,
        }
    ).encode()


async def _pulled_by_two(gate: Any, durable: str, timeout_s: float = 30.0) -> bool:
    """Whether two pull requests are open at once on ``durable`` within ``timeout_s``: two replicas pull from it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (await gate.js.consumer_info(catalog.STREAM, durable)).num_waiting >= 2:
            return True
        await asyncio.sleep(0.1)
    return False


async def _writer(gate: Any) -> str:
    """The process name of the audit replica holding the writer's lease (its pid is in the lease)."""
    kv = await gate.js.key_value(LEASES_BUCKET)
    pid = int((await kv.get(Leases.AUDIT_WRITER)).value.decode().split(":")[1])
    return str(next(name for name, process in gate.stack.processes.items() if process.pid == pid))


async def _new_writer(gate: Any, old: str, timeout_s: float) -> str:
    deadline, logs = time.monotonic() + timeout_s, gate.stack.state_dir / "logs"
    while (now := await _writer_or_none(gate)) in (None, old):
        tails = {path.name: path.read_text(errors="replace")[-1500:] for path in logs.glob("audit*.log")}
        assert time.monotonic() < deadline, f"no replica took over from {old} in {timeout_s}s: {tails}"
        await asyncio.sleep(0.2)
    return str(now)


async def _writer_or_none(gate: Any) -> str | None:
    try:
        return await _writer(gate)
    except Exception:  # the key expired and nobody took it yet, or its holder is gone
        return None


async def _caught_up(gate: Any, timeout_s: float = 90.0) -> dict[str, Any]:
    """``tg.audit.verify`` once the chain holds every stream message (a lost batch returns after ``ack_wait``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        verified = await gate.rpc(Rpc.AUDIT_VERIFY, {}, timeout_s=10)
        if verified["audited_last_seq"] == verified["stream_last_seq"] or time.monotonic() > deadline:
            return dict(verified)
        await asyncio.sleep(0.5)


def _stream_seqs(gate: Any) -> list[int]:
    with sqlite3.connect(gate.paths.state / "audit.sqlite3", timeout=10) as db:
        return [row[0] for row in db.execute("SELECT stream_seq FROM audit_records ORDER BY sequence")]


async def _assert_one_whole_chain(gate: Any) -> None:
    verified = await _caught_up(gate)
    first = int((await gate.js.stream_info(catalog.STREAM)).state.first_seq)
    seqs = _stream_seqs(gate)
    assert verified["ok"], verified
    assert not verified["missing_stream_seqs"] and verified["missing_at_start"] is None, verified
    assert seqs == list(range(first, first + len(seqs))), "a gap, a duplicate or a record out of stream order"
    assert seqs[-1] == verified["stream_last_seq"] and verified["total"] == len(seqs)


async def _calls(gate: Any, count: int) -> list[Any]:
    """``count`` reads at once, four per agent (the tool allows five a minute to each)."""
    agents = [gate.agent() for _ in range((count + 3) // 4)]
    return await asyncio.gather(
        *(gate.call(agents[i // 4], "read", {"path": "hello.txt"}, timeout_s=60) for i in range(count))
    )


async def test_two_replicas_of_policy_executor_and_approvals_share_a_run_with_one_receipt_per_request(
    gate: Any, new_id: Any
) -> None:
    for service in ("policy", "executor", "approvals"):
        gate.stack.start(service, f"{service}-2")
    for durable in (catalog.POLICY_CONSUMER, catalog.EXECUTOR_DECISIONS, catalog.APPROVALS_CONSUMER):
        assert await _pulled_by_two(gate, durable.durable), f"two replicas do not both pull {durable.durable}"

    reads = await _calls(gate, 16)
    agent, names = gate.agent(), [f"{new_id('w')}.txt" for _ in range(3)]
    writes = [await gate.submit(agent, "write", {"path": name, "content": "once\n"}) for name in names]
    for request_id in writes:
        assert (await gate.decide("bob", (await gate.pending(request_id))["approval_id"]))["ok"]
    ended = [await gate.receipt(agent, request_id, timeout_s=60) for request_id in writes]

    assert [issued.outcome for issued in [*reads, *ended]] == ["succeeded"] * 19
    await gate.settle()
    for issued in reads:
        assert await gate.count(f"tg.receipt.*.{issued.request_id}") == 1
    for request_id, name in zip(writes, names, strict=True):
        assert await gate.count(Subjects.receipt(agent, request_id)) == 1
        assert await gate.count(Subjects.decision(agent, request_id)) == 1
        assert (gate.paths.sandbox / name).read_text() == "once\n"


async def test_the_backstop_of_two_executor_replicas_ends_each_stale_request_once(gate: Any, new_id: Any) -> None:
    assert "executor-2" in gate.stack.processes, "runs after the replicas were started"
    assert await _pulled_by_two(gate, catalog.BACKSTOP_CONSUMER.durable)
    agent, stale = gate.agent(), [new_id("stale-") for _ in range(4)]
    for request_id in stale:
        await gate.publish_raw(Subjects.request(agent), _request(request_id), request_id)
    ended = [await gate.receipt(agent, request_id, timeout_s=60) for request_id in stale]
    assert {issued.reason_code for issued in ended} <= {"not_decided", "policy_fault"}, ended
    assert {issued.outcome for issued in ended} <= {"failed", "denied"}, ended
    await asyncio.sleep(10)  # a second backstop pass would have come by now
    assert [await gate.count(Subjects.receipt(agent, request_id)) for request_id in stale] == [1] * 4


async def test_two_audit_replicas_one_killed_mid_run_keep_one_chain_without_a_gap_or_a_duplicate(gate: Any) -> None:
    await _started(gate, "audit", "audit-2")
    old = await _writer(gate)
    running = asyncio.create_task(_calls(gate, 40))
    await asyncio.sleep(1.0)
    gate.stack.stop(old, kill=True)
    assert [issued.outcome for issued in await running] == ["succeeded"] * 40
    started = time.monotonic()
    new = await _new_writer(gate, old, TAKEOVER_S + 5)
    assert time.monotonic() - started < TAKEOVER_S + 5 and new != old
    await _assert_one_whole_chain(gate)
    await _started(gate, "audit", old)  # back as the standby


async def _started(gate: Any, service: str, name: str, timeout_s: float = 60.0) -> None:
    """Start replica ``name`` of ``service`` and wait for its ``started`` line."""
    log = gate.stack.state_dir / "logs" / f"{name}.log"
    offset = log.stat().st_size if log.exists() else 0
    gate.stack.start(service, name)
    deadline = time.monotonic() + timeout_s
    while " started " not in log.read_text(errors="replace")[offset:]:
        tail = log.read_text(errors="replace")[offset:][-3000:]
        assert time.monotonic() < deadline and gate.stack.processes[name].poll() is None, tail
        await asyncio.sleep(0.2)


async def test_a_stopped_writer_resumed_after_a_takeover_appends_nothing(gate: Any) -> None:
    old = await _writer(gate)
    process, log = gate.stack.processes[old], gate.stack.state_dir / "logs" / f"{old}.log"
    os.kill(process.pid, signal.SIGSTOP)
    try:
        running = asyncio.create_task(_calls(gate, 12))
        new = await _new_writer(gate, old, TAKEOVER_S + 5)
        assert [issued.outcome for issued in await running] == ["succeeded"] * 12
    finally:
        size = log.stat().st_size
        os.kill(process.pid, signal.SIGCONT)
    await _calls(gate, 12)
    await asyncio.sleep(LEASE_TTL_S)
    since = log.read_text(errors="replace")[size:]
    assert "appended" not in since, since[-2000:]
    assert f"lease {Leases.AUDIT_WRITER}: lost" in since, since[-2000:]
    assert await _writer(gate) == new
    await _assert_one_whole_chain(gate)


async def test_an_audit_started_late_with_an_empty_store_has_the_whole_chain_from_the_first_message(
    gate: Any, tmp_path: Path
) -> None:
    for name in [name for name in gate.stack.processes if name.startswith("audit")]:
        gate.stack.stop(name)
    for suffix in ("", "-wal", "-shm"):
        kept = gate.paths.state / f"audit.sqlite3{suffix}"
        if kept.exists():
            shutil.move(kept, tmp_path / kept.name)
    await _started(gate, "audit", "audit")
    await _calls(gate, 2)  # the consumer delivers only what came after the others' acks
    await _assert_one_whole_chain(gate)
    assert _stream_seqs(gate)[0] == int((await gate.js.stream_info(catalog.STREAM)).state.first_seq) == 1
