"""Spend budgets end to end: a budget stops the call that would overspend, receipts settle it, the check agrees.

The module's stack serves ``file_system`` with reads costing 1 and a budget of 3 reads a
day per principal. ``effectgate budgets check`` runs as the operator's CLI (a process), and
finds a difference planted in Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_permissions import OPERATOR
from effectgate.policy.budgets.ledger import counter_key
from effectgate.policy.budgets.reconciliation import CountersReply
from effectgate.policy.budgets.rules import window_start

BUDGETS = """
[[budgets]]
name = "daily-reads"
principal = "*"
tool = "file_system"
operation = "read"
limit = 3
window_s = 86400
"""


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    tools = e2e_paths.state.parent / "tools"
    shutil.copytree(repo_root / "deploy/tools", tools)
    descriptor = json.loads((tools / "file_system.json").read_text())
    descriptor["operations"]["read"]["cost"] = 1
    (tools / "file_system.json").write_text(json.dumps(descriptor))
    budgets = e2e_paths.state.parent / "budgets.toml"
    budgets.write_text(BUDGETS)
    return {"EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools), "EFFECTGATE_POLICY_BUDGETS_FILE": str(budgets)}


def _cli(gate: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NATS_URL": gate.stack.url_for(OPERATOR), "COLUMNS": "300"}
    env["EFFECTGATE_STATE_DIR"] = str(gate.paths.state / "no-cli")
    if prefix := gate.stack.connect_options(OPERATOR).get("inbox_prefix"):
        env["EFFECTGATE_INBOX_PREFIX"] = prefix.decode()
    command = [sys.executable, "-m", "effectgate.cli", "budgets", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


async def _committed(gate: Any, principal: str, units: int, timeout_s: float = 20.0) -> None:
    """Wait until ``principal``'s counters have ``units`` committed (the receipts reached the policy)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        reply = await gate.nc.request(Rpc.POLICY_BUDGETS, b'{"count": 500}', timeout=5)
        counters = [c for c in msgspec.json.decode(reply.data, type=CountersReply).counters if c.principal == principal]
        if sum(c.used_units for c in counters) == units and not any(c.reserved_units for c in counters):
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{principal}'s spend never reached {units} committed units")


async def test_the_fourth_call_of_the_day_is_denied_and_the_check_agrees(gate: Any) -> None:
    principal = gate.agent()
    receipts = [await gate.call(principal, "read", {"path": "hello.txt"}) for _ in range(4)]
    assert [r.outcome for r in receipts] == ["succeeded"] * 3 + ["denied"]
    denied = receipts[3]
    assert denied.reason_code == "budget_exceeded" and "budget daily-reads" in denied.reason
    assert denied.retry_after_s is not None and 0 < denied.retry_after_s <= 86_400
    other = gate.agent()
    assert (await gate.call(other, "read", {"path": "hello.txt"})).outcome == "succeeded", "each principal its own"
    await _committed(gate, principal, 30_000)
    await gate.settle()
    checked = _cli(gate, "check", "--settle-s", "1")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no difference" in checked.stdout and "daily-reads" in checked.stdout


async def test_the_check_finds_a_planted_difference(gate: Any) -> None:
    principal = gate.agent()
    assert (await gate.call(principal, "read", {"path": "hello.txt"})).outcome == "succeeded"
    await _committed(gate, principal, 10_000)
    start = window_start(time.time(), 86_400)
    redis = aioredis.Redis.from_url(gate.stack.redis_url)
    try:
        await redis.hincrby(counter_key(principal, "daily-reads", start), "used", 10_000)
    finally:
        await redis.aclose()
    checked = _cli(gate, "check", "--settle-s", "1")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "counter_mismatch" in checked.stderr and principal in checked.stderr


async def test_only_an_uncertain_reservation_can_be_resolved(gate: Any) -> None:
    principal = gate.agent()
    done = await gate.call(principal, "read", {"path": "hello.txt"})
    await _committed(gate, principal, 10_000)
    refused = _cli(gate, "resolve", principal, done.request_id, "--not-run")
    assert refused.returncode == 1 and "committed, not uncertain" in refused.stderr, refused.stderr
