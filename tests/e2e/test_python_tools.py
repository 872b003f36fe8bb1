"""The example ledger's Python tools through the whole system, on real NATS and Redis.

Its descriptors are published with ``effectgate tools publish --from-module`` and its worker runs as
``worker-ledger`` (``examples/ledger``); agents call it with the SDK and through the MCP surface. Faults:
the worker killed on either side of a refund's effect (``uncertain``, then reconciled ``ran`` /
``not_run``), not running (``unavailable``, then served), a report that breaks after three rows, a
busy ledger (a read retried, a write never), two postings on one account at once (one after the other).
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from effectgate.contracts.bus.nats_permissions import worker_user
from effectgate.contracts.events import ReceiptIssued
from effectgate.devstack.workers import WorkerProcess, worker_alive

from .ledger_support import (
    FINANCE,
    MODULE,
    ROOT,
    TOOLS,
    WORKER,
    attributes_toml,
    cli,
    declare_worker,
    publish,
    resolution,
    seed_orders,
    tool_state,
    worker_env,
)
from .support import Gate, Paths
from .surface_support import Surfaces, http_client

pytestmark = pytest.mark.e2e

FAILPOINTS = "worker.reply=hang@fp-ran-;worker.call=hang@fp-notrun-"
"""A refund of a request ``fp-ran-…`` hangs after its effect, one of ``fp-notrun-…`` before it."""


@pytest.fixture(scope="module")
def ledger_db(e2e_paths: Paths) -> Path:
    return e2e_paths.state.parent / "ledger.sqlite3"


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths) -> dict[str, str]:
    base = e2e_paths.state.parent
    principals, attributes = base / "ledger-principals.toml", base / "ledger-attributes.toml"
    principals.write_text(e2e_paths.principals.read_text())
    declare_worker(principals, "greeter")
    attributes.write_text(attributes_toml(e2e_paths.principals.read_text()))
    return {
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(principals),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(principals),
        "EFFECTGATE_POLICY_ATTRIBUTES_FILE": str(attributes),
        "EFFECTGATE_EXECUTOR_RECONCILE_BACKOFF_S": "0.5",
        "EFFECTGATE_EXECUTOR_RECONCILE_MAX_BACKOFF_S": "2",
    }


@pytest.fixture(scope="module")
def published(gate: Gate) -> str:
    return publish(gate)


@pytest.fixture(scope="module")
def worker(gate: Gate, published: str, ledger_db: Path) -> Iterator[WorkerProcess]:
    env = worker_env(gate, ledger_db, FAILPOINTS)
    process = WorkerProcess(MODULE, WORKER, env, gate.paths.state / "logs" / "worker-ledger.log")
    process.start()
    yield process
    process.stop()


@pytest_asyncio.fixture(scope="module")
async def served(gate: Gate, worker: WorkerProcess, ledger_db: Path) -> AsyncIterator[WorkerProcess]:
    """The worker, announced, with the ledger's orders in place and every tool ``ready``."""
    await worker_alive(gate.nc, WORKER)
    seed_orders(ledger_db, [(f"ORD-{index}", "ada", 100.0) for index in range(1, 9)])
    for tool in TOOLS:
        await tool_state(gate, tool, "ready")
    yield worker


def _refunds(ledger_db: Path) -> list[tuple[str, str, float, str]]:
    with sqlite3.connect(ledger_db) as db:
        return list(db.execute("SELECT refund_id, order_id, amount, call_key FROM refunds ORDER BY rowid"))


async def _approve_twice(gate: Gate, request_id: str) -> None:
    pending = await gate.pending(request_id, timeout_s=20.0)
    for approver in FINANCE:
        answered = await gate.decide(approver, pending["approval_id"])
        assert answered.get("ok"), answered


async def test_a_read_runs_alone_and_a_refund_runs_once_after_two_approvals_with_its_refund_id(
    gate: Gate, served: WorkerProcess, ledger_db: Path, new_id: Any
) -> None:
    principal = gate.agent()
    read = await gate.call(principal, "lookup_order", {"order_id": "ORD-1"}, tool="lookup_order")
    assert (read.outcome, read.result["order_id"]) == ("succeeded", "ORD-1"), read.reason
    client, key = await gate.client(principal), new_id("refund-")
    request_id = await client.submit("refunds", "refund", {"order_id": "ORD-1", "amount": 25.0}, idempotency_key=key)
    await _approve_twice(gate, request_id)
    issued = await gate.receipt(principal, request_id, timeout_s=30.0)
    assert issued.outcome == "succeeded", issued.reason
    mine = [row for row in _refunds(ledger_db) if row[3] == f"{principal}:{key}"]
    assert len(mine) == 1 and issued.target_effect_id == mine[0][0] == issued.result["refund_id"]
    again = await gate.call(principal, "refund", {"order_id": "ORD-1", "amount": 25.0}, tool="refunds", key=key)
    assert (again.outcome, again.replay_outcome) == ("replayed", "succeeded")
    assert len([row for row in _refunds(ledger_db) if row[3] == f"{principal}:{key}"]) == 1


async def test_a_refusal_of_the_tool_is_a_refused_receipt_and_nothing_is_written(
    gate: Gate, served: WorkerProcess, ledger_db: Path, new_id: Any
) -> None:
    principal, key = gate.agent(), new_id("too-much-")
    client = await gate.client(principal)
    request_id = await client.submit("refunds", "refund", {"order_id": "ORD-2", "amount": 400.0}, idempotency_key=key)
    await _approve_twice(gate, request_id)
    issued = await gate.receipt(principal, request_id, timeout_s=30.0)
    assert (issued.outcome, issued.reason_code) == ("refused", "refund_exceeds_order"), issued.reason
    assert not [row for row in _refunds(ledger_db) if row[3] == f"{principal}:{key}"]


async def test_a_worker_killed_on_either_side_of_the_effect_leaves_uncertain_calls_the_reconciler_resolves(
    gate: Gate, served: WorkerProcess, ledger_db: Path, new_id: Any
) -> None:
    principal = gate.agent()
    client = await gate.client(principal)
    calls = {"ran": (new_id("fp-ran-"), new_id("k-")), "not_run": (new_id("fp-notrun-"), new_id("k-"))}
    arguments = {"ran": {"order_id": "ORD-3", "amount": 10.0}, "not_run": {"order_id": "ORD-4", "amount": 10.0}}
    for expected, (request_id, key) in calls.items():
        await client.submit("refunds", "refund", arguments[expected], idempotency_key=key, request_id=request_id)
        await _approve_twice(gate, request_id)
    await _until(lambda: any(row[3] == f"{principal}:{calls['ran'][1]}" for row in _refunds(ledger_db)))
    await asyncio.sleep(1.0)  # both calls are held now: one after its write, one before it
    served.kill()
    served.env = {**served.env, "EFFECTGATE_FAILPOINTS": ""}
    for request_id, _ in calls.values():
        assert (await gate.receipt(principal, request_id, timeout_s=40.0)).outcome == "uncertain"
    served.start()
    await worker_alive(gate.nc, WORKER)
    for expected, (request_id, key) in calls.items():
        resolved = await resolution(gate, principal, request_id)
        assert (resolved.resolution, resolved.resolved_by) == (expected, "reconciler")
        rows = [row for row in _refunds(ledger_db) if row[3] == f"{principal}:{key}"]
        assert len(rows) == (1 if expected == "ran" else 0)
        assert resolved.effect_id == (rows[0][0] if rows else None)
        again = await gate.call(principal, "refund", arguments[expected], tool="refunds", key=key)
        assert (again.replay_outcome, again.resolution) == ("uncertain", expected)


async def _until(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "not reached"
        await asyncio.sleep(0.1)


async def test_a_tool_whose_worker_is_not_running_is_unavailable_then_served_when_it_starts(
    gate: Gate, served: WorkerProcess
) -> None:
    principal = gate.agent()
    served.stop()
    await tool_state(gate, "lookup_order", "unavailable")
    denied = await gate.call(principal, "lookup_order", {"order_id": "ORD-5"}, tool="lookup_order")
    assert (denied.outcome, denied.reason_code) == ("denied", "tool_unavailable"), denied.reason
    served.start()
    await worker_alive(gate.nc, WORKER)
    await tool_state(gate, "lookup_order", "ready")
    read = await gate.call(principal, "lookup_order", {"order_id": "ORD-5"}, tool="lookup_order")
    assert read.outcome == "succeeded", read.reason


async def test_a_report_that_breaks_after_three_rows_is_one_failed_receipt_with_nothing_partial(
    gate: Gate, served: WorkerProcess, ledger_db: Path
) -> None:
    principal = gate.agent()
    whole = await gate.call(principal, "export_report", {}, tool="export_report")
    assert whole.outcome == "succeeded" and [row["order_id"] for row in whole.result][:3] == ["ORD-1", "ORD-2", "ORD-3"]
    with sqlite3.connect(ledger_db) as db:
        db.execute("INSERT OR REPLACE INTO orders VALUES ('ORD-35', '', 1.0)")  # sorts fourth: a corrupt row
    try:
        broken = await gate.call(principal, "export_report", {}, tool="export_report")
    finally:
        with sqlite3.connect(ledger_db) as db:
            db.execute("DELETE FROM orders WHERE order_id = 'ORD-35'")
    assert (broken.outcome, broken.reason_code, broken.result) == ("failed", "corrupt_order", None), broken.reason


def _hold_lock(ledger_db: Path, hold_s: float, held: threading.Event) -> None:
    with sqlite3.connect(ledger_db, isolation_level=None) as db:
        db.execute("BEGIN EXCLUSIVE")
        held.set()
        time.sleep(hold_s)
        db.execute("COMMIT")


async def test_a_busy_ledger_read_is_retried_by_its_policy_and_a_write_is_never_retried(
    gate: Gate, served: WorkerProcess, ledger_db: Path, new_id: Any
) -> None:
    principal, key = gate.agent(2), new_id("journal-")
    held = threading.Event()
    locker = threading.Thread(target=_hold_lock, args=(ledger_db, 0.5, held))
    locker.start()
    held.wait(5)
    read = await gate.call(principal, "lookup_order", {"order_id": "ORD-6"}, tool="lookup_order")
    locker.join()
    assert read.outcome == "succeeded", read.reason  # its first call met the lock; a retry found the ledger free
    held.clear()
    locker = threading.Thread(target=_hold_lock, args=(ledger_db, 1.5, held))
    locker.start()
    held.wait(5)
    arguments = {"account": key.lower()[:32], "memo": "busy"}
    written = await gate.call(principal, "post", arguments, tool="journal", key=key)
    locker.join()
    assert (written.outcome, written.reason_code) == ("failed", "ledger_busy"), written.reason
    await asyncio.sleep(1.0)
    with sqlite3.connect(ledger_db) as db:
        assert not list(db.execute("SELECT * FROM journal WHERE memo = 'busy'"))  # not retried once the lock went


async def test_two_postings_on_one_account_run_one_after_the_other(
    gate: Gate, served: WorkerProcess, new_id: Any
) -> None:
    principal, account = gate.agent(2), new_id("acct-").lower()[:20]
    arguments = [{"account": account, "memo": f"m{index}", "hold_s": 1.0} for index in range(2)]
    posted: list[ReceiptIssued] = await asyncio.gather(
        *(gate.call(principal, "post", body, tool="journal", key=new_id("post-")) for body in arguments)
    )
    assert [receipt.outcome for receipt in posted] == ["succeeded", "succeeded"], [r.reason for r in posted]
    first, second = sorted((receipt.result for receipt in posted), key=lambda result: result["started"])
    assert second["started"] >= first["ended"]


async def test_an_mcp_client_calls_a_python_tool_through_the_surface(
    gate: Gate, served: WorkerProcess, surfaces: Surfaces
) -> None:
    principal = gate.agent()
    url = surfaces.start()
    async with http_client(url, surfaces.token_of(principal), "legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "lookup_order__lookup_order" in names and "export_report__export_report" in names
        result = await client.call_tool("lookup_order__lookup_order", {"order_id": "ORD-7"})
    assert result.is_error is False and result.structured_content is not None
    assert result.structured_content["order_id"] == "ORD-7"


def _readme_tool() -> str:
    """The README's Python tool: the first Python block after its marker."""
    text = (ROOT / "README.md").read_text()
    after = text.split("<!-- python-tool snippet:", 1)[1]
    found = re.search(r"```python\n(.*?)```", after, re.S)
    assert found is not None, "the README has no Python tool"
    return found.group(1)


async def test_the_readme_python_tool_is_published_served_and_called_as_the_readme_says(
    gate: Gate, served: WorkerProcess, tmp_path: Path
) -> None:
    (tmp_path / "greetings.py").write_text(_readme_tool())
    env = {
        **gate.stack.nats_env(worker_user("greeter")),
        "EFFECTGATE_PUBLIC_KEYS_DIR": str(gate.stack.public_keys),
        "PYTHONPATH": str(tmp_path),
    }
    greeter = WorkerProcess("greetings", "greeter", env, gate.paths.state / "logs" / "worker-greeter.log")
    greeter.start()
    try:
        await worker_alive(gate.nc, "greeter")
        key = str(gate.stack.keys_dir("operator") / "operator.key")
        args = ("tools", "publish", "--from-module", "greetings", "--worker", "greeter", "--app-dir", str(tmp_path))
        done = cli(gate, *args, "--key", key)
        assert done.returncode == 0 and "greet@1.0.0 published" in done.stdout, done.stderr + done.stdout
        principal = gate.agent()
        greeted = await gate.call(principal, "greet", {"name": "Ann"}, tool="greet")
        assert (greeted.outcome, greeted.result) == ("succeeded", f"Hello, Ann! (asked by {principal})"), greeted.reason
    finally:
        greeter.stop()


async def test_a_worker_whose_declaration_differs_from_what_was_published_is_refused_and_reported(
    gate: Gate, served: WorkerProcess, tmp_path: Path
) -> None:
    published = tmp_path / "published"
    changed = tmp_path / "changed"
    for folder, said in ((published, "Hello"), (changed, "Goodbye")):
        folder.mkdir()
        text = _readme_tool().replace("async def greet", "async def farewell").replace('f"Hello', f'f"{said}')
        (folder / "farewells.py").write_text(text.replace('"""Greet someone', f'"""{said} someone'))
    key = str(gate.stack.keys_dir("operator") / "operator.key")
    args = ("tools", "publish", "--from-module", "farewells", "--worker", "greeter", "--app-dir", str(published))
    assert cli(gate, *args, "--key", key).returncode == 0
    env = {
        **gate.stack.nats_env(worker_user("greeter")),
        "EFFECTGATE_PUBLIC_KEYS_DIR": str(gate.stack.public_keys),
        "PYTHONPATH": str(changed),
    }
    rogue = WorkerProcess("farewells", "greeter", env, gate.paths.state / "logs" / "worker-greeter-changed.log")
    rogue.start()
    try:
        await worker_alive(gate.nc, "greeter")
        reason = await tool_state(gate, "farewell", "unavailable", saying="declares")
        assert reason.count("sha256:") == 2 and "published" in reason, reason  # both digests named
        denied = await gate.call(gate.agent(), "farewell", {"name": "Ann"}, tool="farewell")
        assert (denied.outcome, denied.reason_code) == ("denied", "tool_unavailable"), denied.reason
    finally:
        rogue.stop()
