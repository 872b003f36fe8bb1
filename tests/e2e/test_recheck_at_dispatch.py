"""What runs is what is still allowed: a change of policy, principal or tool version reaches waiting calls.

The stack's policy service reads a copy of the policy and of the principal directory
that the tests edit, then restart the policy service (guarantee 4 and "re-check at the
moment of effect": approvals and the executor ask the policy service again).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.stack.readiness import wait_ready

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

FREEZE = (
    '\n@id("freeze-writes")\n@reason("writes are frozen")\n'
    'forbid (principal, action, resource) when { context.operation == "write" };\n'
)


@pytest.fixture(scope="module")
def policy_files(e2e_paths: Any, repo_root: Path) -> tuple[Path, Path]:
    policy, directory = e2e_paths.state.parent / "policy.cedar", e2e_paths.state.parent / "policy-principals.toml"
    shutil.copy(repo_root / "deploy/policy/policy.cedar", policy)
    shutil.copy(e2e_paths.principals, directory)
    return policy, directory


@pytest.fixture(scope="module")
def stack_env(policy_files: tuple[Path, Path]) -> dict[str, str]:
    policy, directory = policy_files
    return {"EFFECTGATE_POLICY_POLICY_FILE": str(policy), "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(directory)}


async def _restart_policy(gate: Any) -> None:
    gate.stack.stop("policy")
    gate.stack.start("policy")
    await wait_ready(gate.stack, ("policy",))


class Edits:
    """Changes to the policy service's files; undone (and the policy restarted) after each test."""

    def __init__(self, gate: Any, files: tuple[Path, Path]) -> None:
        self.gate, (self.policy, self.directory) = gate, files
        self.originals = (self.policy.read_text(), self.directory.read_text())

    async def freeze_writes(self) -> None:
        self.policy.write_text(self.originals[0] + FREEZE)
        await _restart_policy(self.gate)

    async def remove(self, principal: str) -> None:
        kept = self.originals[1].split(f"[principals.{principal}]\n", 1)
        assert len(kept) == 2, principal
        rest = kept[1].split("\n\n", 1)[1]
        self.directory.write_text(kept[0] + rest)
        await _restart_policy(self.gate)

    async def undo(self) -> None:
        if (self.policy.read_text(), self.directory.read_text()) != self.originals:
            self.policy.write_text(self.originals[0])
            self.directory.write_text(self.originals[1])
            await _restart_policy(self.gate)


@pytest.fixture
async def edits(gate: Any, policy_files: tuple[Path, Path]) -> Any:
    made = Edits(gate, policy_files)
    yield made
    await made.undo()


async def _approve(gate: Any, approval_id: str, approver: str = "alice") -> dict[str, Any]:
    """Approve; a policy service still starting answers ``policy_unreachable`` (try again)."""
    deadline = time.monotonic() + 15
    while True:
        reply = await gate.decide(approver, approval_id)
        if reply["reason_code"] != "policy_unreachable" or time.monotonic() > deadline:
            return reply
        await asyncio.sleep(0.3)


async def _pending_write(gate: Any, new_id: Any, autonomy: int = 1, **submit: Any) -> tuple[str, str, str, str]:
    agent, name = gate.agent(autonomy), new_id("later-") + ".txt"
    client = await gate.client(agent)
    request_id = await client.submit("file_system", "write", {"path": name, "content": "x"}, **submit)
    approval_id = (await gate.pending(request_id))["approval_id"]
    return agent, request_id, approval_id, name


async def test_an_approval_for_a_call_the_new_policy_forbids_runs_nothing(
    gate: Any, edits: Edits, new_id: Any, watch: Any
) -> None:
    watch.watch(gate.paths.sandbox)
    agent, request_id, approval_id, name = await _pending_write(gate, new_id)
    await edits.freeze_writes()

    reply = await _approve(gate, approval_id)
    assert (reply["ok"], reply["reason_code"]) == (False, "forbidden") and "frozen" in reply["reason"], reply
    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("denied", "forbidden"), issued.reason
    assert not await gate.is_pending(request_id)
    assert not (gate.paths.sandbox / name).exists() and watch.count(name, 0xFFF) == 0


async def test_an_approval_for_a_principal_no_longer_in_the_directory_runs_nothing(
    gate: Any, edits: Edits, new_id: Any
) -> None:
    agent, request_id, approval_id, name = await _pending_write(gate, new_id)
    await edits.remove(agent)

    reply = await _approve(gate, approval_id)
    assert (reply["ok"], reply["reason_code"]) == (False, "unknown_principal"), reply
    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("denied", "unknown_principal")
    assert not (gate.paths.sandbox / name).exists()


async def test_a_decision_that_waited_is_rechecked_by_the_executor_before_it_runs(
    gate: Any, edits: Edits, new_id: Any
) -> None:
    gate.stack.stop("executor")
    try:
        agent, name = gate.agent(2), new_id("waited-") + ".txt"
        request_id = await gate.submit(agent, "write", {"path": name, "content": "x"})
        await asyncio.sleep(6)  # older than EFFECTGATE_EXECUTOR_RECHECK_AFTER_S when the executor sees it
        await edits.freeze_writes()
    finally:
        gate.stack.start("executor")
    issued = await gate.receipt(agent, request_id, timeout_s=60)
    assert (issued.outcome, issued.reason_code) == ("denied", "forbidden"), issued.reason
    assert not (gate.paths.sandbox / name).exists()


async def test_a_replay_reaches_only_a_caller_the_policy_still_allows(gate: Any, edits: Edits, new_id: Any) -> None:
    agent, key = gate.agent(), new_id("k")
    first = await gate.call(agent, "read", {"path": "hello.txt"}, key=key)
    assert first.outcome == "succeeded"
    await edits.remove(agent)
    again = await gate.call(agent, "read", {"path": "hello.txt"}, key=key)
    assert (again.outcome, again.reason_code, again.result) == ("denied", "unknown_principal", None)


async def test_replays_use_up_the_rate_limit(gate: Any, new_id: Any) -> None:
    agent, key = gate.agent(), new_id("k")
    outcomes = [(await gate.call(agent, "read", {"path": "hello.txt"}, key=key)).reason_code for _ in range(6)]
    assert outcomes == ["ok", "ok", "ok", "ok", "ok", "rate_limited"], outcomes


async def test_an_approval_for_a_superseded_tool_version_runs_nothing_unless_pinned(
    gate: Any, new_id: Any, repo_root: Path
) -> None:
    descriptor = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    shipped, newer = descriptor["version"], "9.0.0"  # the version every stack starts with, and one above it
    agent, request_id, approval_id, name = await _pending_write(gate, new_id)
    pinned_agent, pinned_id, pinned_approval, pinned_name = await _pending_write(gate, new_id, version=shipped)
    descriptor["version"] = newer
    descriptor["operations"]["write"]["side_effect_class"] = "IRREVERSIBLE_WRITE"
    reply = await gate.publish_tool(descriptor)
    assert reply["ok"], reply

    refused = await _approve(gate, approval_id)
    assert (refused["ok"], refused["reason_code"]) == (False, "descriptor_superseded"), refused
    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("denied", "descriptor_superseded") and newer in issued.reason
    assert not (gate.paths.sandbox / name).exists()

    assert (await _approve(gate, pinned_approval))["ok"]
    pinned = await gate.receipt(pinned_agent, pinned_id)
    assert pinned.outcome == "succeeded", pinned.reason
    assert (gate.paths.sandbox / pinned_name).read_text() == "x"
