"""The policy lifecycle against the running system: simulate, publish, hot reload on two replicas, explain, restart.

The module's stack decides with a copy of the shipped policy (seeded into the policy
bucket at start). The tests run in order: the recorded decisions are replayed through
the unchanged and a changed policy (``effectgate policy simulate``), the changed policy is
published (``effectgate policy publish``) while two policy replicas run and both switch
without a restart, an invalid one is refused, a decision is explained under the version
that made it and the one in force, and a restart keeps the publication unless the file
changed. The replicas poll the bucket only every 60 s: a switch within seconds is the
subscription's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import DecisionMade
from effectgate.contracts.integrity.signing import load_public_key, verify_body
from effectgate.shared.stores.policy_kv import policy_digest

pytestmark = pytest.mark.e2e

FORBID_ONE_FILE = """
// lifecycle test: an argument-aware rule published without a restart
@id("no-reading-forbidden-txt")
@reason("forbidden.txt may not be read")
forbid (principal, action, resource)
when { context.operation == "read" && context.args has path && context.args.path == "forbidden.txt" };
"""
NEVER_MATCHES = """
@id("payments-team-reads")
permit (principal is Agent, action == Action::"execute", resource is Tool)
when { principal has department && principal.department == "payments" };
"""


@pytest.fixture(scope="module")
def policy_file(e2e_paths: Any, repo_root: Path) -> Path:
    """The module's own copy of the shipped policy (a later test edits it)."""
    target = e2e_paths.state.parent / "policy.cedar"
    target.write_text((repo_root / "deploy/policy/policy.cedar").read_text())
    return target


@pytest.fixture(scope="module")
def stack_env(policy_file: Path) -> dict[str, str]:
    return {"EFFECTGATE_POLICY_POLICY_FILE": str(policy_file), "EFFECTGATE_POLICY_FOLLOW_INTERVAL_S": "60"}


@pytest.fixture(scope="module")
def shipped(policy_file: Path) -> str:
    return policy_file.read_text()


@pytest.fixture(scope="module")
def changed(shipped: str) -> str:
    return shipped + FORBID_ONE_FILE


@pytest.fixture(scope="module")
def changed_file(e2e_paths: Any, changed: str) -> Path:
    path = e2e_paths.state.parent / "changed.cedar"
    path.write_text(changed)
    return path


@pytest.fixture(scope="module")
def invalid_file(e2e_paths: Any, changed: str) -> Path:
    path = e2e_paths.state.parent / "invalid.cedar"
    path.write_text(changed + NEVER_MATCHES)
    return path


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[str]]:
    """Request ids of the first test's calls, by kind, for the later tests."""
    return {}


async def effectgate(stack: Stack, e2e_paths: Any, repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``effectgate`` command as the operator of ``stack``, as a person would."""
    env = {k: v for k, v in os.environ.items() if k != "EFFECTGATE_CREDENTIALS"}
    env |= {
        "NATS_URL": stack.nats_url,
        "EFFECTGATE_STATE_DIR": str(stack.state_dir),
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(e2e_paths.principals),
        "EFFECTGATE_POLICY_ATTRIBUTES_FILE": str(repo_root / "deploy/policy/attributes.toml"),
        "COLUMNS": "400",
    }
    command = [sys.executable, "-m", "effectgate.cli", *args]
    run = lambda: subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)  # noqa: E731
    return await asyncio.to_thread(run)


async def in_force(gate: Any, replicas: int = 1, timeout_s: float = 20.0) -> dict[str, str | None]:
    """The version each policy replica reports (``tg.policy.ready``), once ``replicas`` of them answered.

    The queue group hands each request to a replica at random: it is asked 40 times at least.
    """
    seen: dict[str, str | None] = {}
    deadline, asked = time.monotonic() + timeout_s, 0
    while len(seen) < replicas or asked < 40:
        try:
            ready = await gate.rpc(Rpc.POLICY_READY, {}, timeout_s=2.0)
            seen[ready["replica"]], asked = ready["version"], asked + 1
        except nats.errors.Error:  # restarting: nobody answers yet
            await asyncio.sleep(0.2)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(seen)} of {replicas} policy replicas answered: {seen}")
    return seen


async def until_all(gate: Any, version: str, replicas: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while set((seen := await in_force(gate, replicas)).values()) != {version}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"replicas still on {seen}, not {version}")
        await asyncio.sleep(0.2)


async def decision(gate: Any, principal: str, request_id: str) -> DecisionMade:
    stored = await gate.js.get_last_msg(catalog.STREAM, Subjects.decision(principal, request_id))
    return msgspec.json.decode(stored.data, type=DecisionMade)


async def published_events(gate: Any) -> list[dict[str, Any]]:
    events, seq = [], 1
    while True:
        try:
            found = await gate.js.get_msg(catalog.STREAM, seq=seq, subject=Subjects.POLICY_PUBLISHED, next=True)
        except Exception:  # no further message
            return events
        events.append(json.loads(found.data))
        seq = found.seq + 1


async def test_simulate_gives_the_live_verdicts_for_the_policy_in_force_and_names_each_change(
    gate: Any, stack: Stack, e2e_paths: Any, repo_root: Path, policy_file: Path, changed_file: Path, recorded: Any
) -> None:
    (gate.paths.sandbox / "forbidden.txt").write_text("not for agents\n")
    agent = gate.agent()
    recorded["forbidden"] = [(await gate.submit(agent, "read", {"path": "forbidden.txt"})) for _ in range(2)]
    recorded["allowed"] = [await gate.submit(agent, "read", {"path": "hello.txt"})]
    recorded["write"] = [await gate.submit(agent, "write", {"path": "w.txt", "content": "x"})]
    recorded["agent"] = [agent]
    for request_id in recorded["forbidden"] + recorded["allowed"]:
        receipt = await gate.receipt(agent, request_id)
        assert receipt.outcome == "succeeded", receipt.reason
    assert (await gate.call(agent, "read", {"path": 5})).reason_code == "schema_invalid"  # never reaches the policy
    await gate.settle()

    same = await effectgate(stack, e2e_paths, repo_root, "policy", "simulate", str(policy_file), "--json")
    assert same.returncode == 0, same.stderr
    unchanged = json.loads(same.stdout)
    assert unchanged["changes"] == [] and unchanged["compared"] >= 4, unchanged
    assert any("schema_invalid" in why for why in unchanged["not_comparable"]), unchanged

    changed = await effectgate(stack, e2e_paths, repo_root, "policy", "simulate", str(changed_file), "--json")
    assert changed.returncode == 0, changed.stderr
    changes = json.loads(changed.stdout)["changes"]
    assert sorted(c["request_id"] for c in changes) == sorted(recorded["forbidden"]), changes
    assert {(c["tool"], c["principal"], c["before"], c["after"], c["after_code"]) for c in changes} == {
        ("file_system", agent, "execute", "deny", "forbidden")
    }
    table = await effectgate(stack, e2e_paths, repo_root, "policy", "simulate", str(changed_file), "--since", "1h")
    assert "execute → deny" in table.stdout and all(rid in table.stdout for rid in recorded["forbidden"]), table.stdout
    assert "2 would change" in " ".join(table.stdout.split()), table.stdout


async def test_a_publish_switches_both_replicas_without_a_restart_and_decisions_name_the_new_version(
    gate: Any, stack: Stack, e2e_paths: Any, repo_root: Path, shipped: str, changed: str, changed_file: Path
) -> None:
    stack.start("policy", "policy-2")
    first, second = stack.processes["policy"], stack.processes["policy-2"]
    await until_all(gate, policy_digest(shipped), replicas=2, timeout_s=60)

    done = await effectgate(stack, e2e_paths, repo_root, "policy", "publish", str(changed_file))
    new = policy_digest(changed)
    assert done.returncode == 0 and new in done.stdout, done.stdout + done.stderr
    await until_all(gate, new, replicas=2, timeout_s=30)  # seconds on a loaded machine; no restart either way
    assert stack.processes["policy"] is first and stack.processes["policy-2"] is second
    assert first.poll() is None and second.poll() is None, "a replica restarted"

    agent = gate.agent()
    allowed = [await gate.submit(agent, "read", {"path": "hello.txt"}) for _ in range(6)]
    refused = await gate.call(agent, "read", {"path": "forbidden.txt"})
    assert (refused.outcome, refused.reason_code, refused.reason) == (
        "denied",
        "forbidden",
        "forbidden.txt may not be read",
    )
    for request_id in allowed:  # submitted, not awaited: each is decided once it has a receipt
        await gate.receipt(agent, request_id)
    for request_id in [*allowed, refused.request_id]:
        assert (await decision(gate, agent, request_id)).policy_version == new

    events = await published_events(gate)
    assert [(e["source"], e["version"], e["previous_version"]) for e in events] == [
        ("file", policy_digest(shipped), None),
        ("cli", new, policy_digest(shipped)),
    ]
    assert verify_body(events[-1], load_public_key(stack.public_keys / "policy.pub"))


async def test_an_invalid_policy_or_a_malformed_request_is_refused_at_publish_and_the_old_one_stays(
    gate: Any, stack: Stack, e2e_paths: Any, repo_root: Path, changed: str, invalid_file: Path
) -> None:
    checked = await effectgate(stack, e2e_paths, repo_root, "policy", "check", str(invalid_file))
    done = await effectgate(stack, e2e_paths, repo_root, "policy", "publish", str(invalid_file))

    for said in (checked, done):
        text = " ".join(said.stderr.split())
        assert said.returncode == 1 and "'payments-team-reads'" in text and "principal.department" in text, text
    await until_all(gate, policy_digest(changed), replicas=2)
    for body, named in (
        (b"not json", 'not {"text"'),
        (b'{"text": "x", "as": "admin"}', "as"),
        (b"x" * 300_000, "bytes"),
    ):
        reply = json.loads((await gate.nc.request(Rpc.POLICY_PUBLISH, body, timeout=10)).data)
        assert (reply["ok"], reply["version"]) == (False, None) and named in reply["reason"], reply
    kv = await gate.js.key_value(catalog.POLICY_BUCKET)
    assert json.loads((await kv.get("current")).value)["version"] == policy_digest(changed)
    assert len(await published_events(gate)) == 2
    refusals = await gate.count(Subjects.security("policy", "policy_refused"))
    assert refusals == 4, "every refused publication is recorded (the invalid file, the three bodies)"


async def test_explain_shows_the_policies_that_decided_under_each_version(
    gate: Any, stack: Stack, e2e_paths: Any, repo_root: Path, shipped: str, changed: str, recorded: Any
) -> None:
    request_id = recorded["forbidden"][0]
    shown = await effectgate(stack, e2e_paths, repo_root, "policy", "explain", request_id)
    text = shown.stdout
    assert shown.returncode == 0, shown.stderr
    assert policy_digest(shipped) in text and policy_digest(changed) in text
    before, now = text.split("in force now", 1)
    assert "read-only-low-risk" in before and "verdict: execute (permitted)" in before
    assert "no-reading-forbidden-txt" in now and "verdict: deny (forbidden)" in now
    assert "forbidden.txt may not be read" in now and '"path": "forbidden.txt"' in now  # annotation and context
    assert 'context.args.path == "forbidden.txt"' in now  # the rule's source
    assert "\\n" not in text, "line breaks are breaks, not escapes"

    missing = await effectgate(stack, e2e_paths, repo_root, "policy", "explain", "no-such-request")
    assert missing.returncode == 1 and "no recorded decision" in missing.stderr


async def test_a_restart_keeps_the_publication_and_an_edited_file_is_seeded(
    gate: Any, stack: Stack, shipped: str, policy_file: Path, changed: str
) -> None:
    stack.stop("policy-2")
    stack.stop("policy")
    stack.start("policy")
    await until_all(gate, policy_digest(changed), replicas=1, timeout_s=60)  # not the file's

    edited = shipped + "\n// edited while the service was down\n"
    await asyncio.to_thread(policy_file.write_text, edited)
    stack.stop("policy")
    stack.start("policy")
    await until_all(gate, policy_digest(edited), replicas=1, timeout_s=60)
    assert (await published_events(gate))[-1]["source"] == "file"
