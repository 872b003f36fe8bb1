"""Answers before an approval opens, joined requests, and listings larger than one message, on the real stack.

Secured NATS, every service a process. An approver who answers the id derived from a
request just submitted is told ``approval_not_open`` (and answers again) or counted, never
reported as an attack; a request that joined another's approval is answered through its
own id, and both the SDK and its receipt name the approval it joined. Twenty pending
writes of 60 kB arguments are listed page after page (CLI, SDK of the approvers' RPC), and
a registry of 150 tools of 10 kB each reaches the agent whole through ``list_tools``.
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

import pytest

from effectgate.contracts.bus.catalog import Rpc, Subjects

pytestmark = pytest.mark.e2e

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
REFUSED = Subjects.security("approvals", "approval_refused")


def _effectgate(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    env.update({"NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir), "COLUMNS": "200"})
    return subprocess.run([EFFECTGATE, *args], env=env, capture_output=True, text=True, timeout=120)


async def _answer_until_counted(gate: Any, approval_id: str, timeout_s: float = 20.0) -> tuple[dict[str, Any], int]:
    """Approve ``approval_id`` as alice at once and again while it is not open; the answer and the early ones."""
    early, deadline = 0, time.monotonic() + timeout_s
    while True:
        answer = await gate.decide("alice", approval_id)
        if answer["reason_code"] != "approval_not_open" or time.monotonic() > deadline:
            return answer, early
        early += 1
        await asyncio.sleep(0.02)


async def _refusals(gate: Any) -> int:
    await asyncio.sleep(1.0)  # a report is published in the background
    return int(await gate.count(REFUSED))


async def test_answers_given_right_after_submitting_count_and_raise_no_alarm(gate: Any, new_id: Any) -> None:
    before = await _refusals(gate)
    answers, clients = [], [await gate.client(gate.agent()) for _ in range(2)]
    for index in range(8):  # four calls an agent: within its rate of five writes a minute
        client = clients[index // 4]
        request_id = await client.submit("file_system", "write", {"path": new_id("early-") + ".txt", "content": "x"})
        answer, _ = await _answer_until_counted(gate, client.approval_id(request_id))
        answers.append((client, request_id, answer))
    assert all(answer["reason_code"] == "granted" for *_, answer in answers), answers
    for client, request_id, _ in answers:
        issued = await client.receipt(request_id, timeout_s=30.0)
        assert (issued.outcome, issued.approval_id) == ("succeeded", client.approval_id(request_id)), issued
    assert await _refusals(gate) == before, "an answer before its approval opened was reported as an attack"


async def test_a_never_opening_id_is_still_refused_and_reported(gate: Any) -> None:
    before = await _refusals(gate)
    answer = await gate.decide("alice", "ap-0123456789ab")
    assert (answer["ok"], answer["reason_code"]) == (False, "unknown_approval")
    assert await _refusals(gate) == before + 1


async def test_a_joined_request_is_answered_through_its_own_id_and_names_the_approval_it_joined(
    gate: Any, new_id: Any
) -> None:
    agent, key, name = gate.agent(), new_id("key-"), new_id("joined-") + ".txt"
    client = await gate.client(agent)
    arguments = {"path": name, "content": "once"}
    first = await client.submit("file_system", "write", arguments, idempotency_key=key)
    await gate.pending(first)
    second = await client.submit("file_system", "write", arguments, idempotency_key=key)
    for _ in range(100):
        standing = await client.approval(second)
        if standing.reason_code != "not_open":
            break
        await asyncio.sleep(0.1)
    assert (standing.reason_code, standing.approval_id, standing.joined) == ("pending", client.approval_id(first), True)
    answer, _ = await _answer_until_counted(gate, client.approval_id(second))  # the id the second would have had
    assert (answer["reason_code"], answer["approval_id"]) == ("granted", client.approval_id(first))
    receipts = [await client.receipt(rid, timeout_s=30.0) for rid in (first, second)]
    assert {r.outcome for r in receipts} == {"succeeded", "replayed"}
    assert {r.approval_id for r in receipts} == {client.approval_id(first)}
    assert (gate.paths.sandbox / name).read_text() == "once"


async def test_twenty_pending_writes_of_60_kb_are_listed_page_after_page(gate: Any, new_id: Any) -> None:
    agents = [gate.agent() for _ in range(4)]  # five writes each: an agent's rate a minute
    sent = []
    for index in range(20):
        client = await gate.client(agents[index // 5])
        content = f"{index:02d}" + "b" * 60_000
        sent.append(await client.submit("file_system", "write", {"path": new_id("big-") + ".txt", "content": content}))
    for request_id in sent:
        await gate.pending(request_id, timeout_s=30.0)
    first = await gate.rpc(Rpc.APPROVALS_LIST, {})
    assert first["ok"] and first["next"] is not None, "twenty 60 kB approvals do not fit one message"
    mine = [item for item in await gate.approvals() if item["principal"] in agents]
    assert sorted(item["request_id"] for item in mine) == sorted(sent)
    listed = await asyncio.to_thread(_effectgate, gate.stack, "approvals", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {item["request_id"] for item in json.loads(listed.stdout)} >= set(sent)
    summary = await asyncio.to_thread(_effectgate, gate.stack, "approvals", "list", "--summary")
    assert summary.returncode == 0 and summary.stdout.count("left out: effectgate approvals show") >= 20
    shown = await asyncio.to_thread(_effectgate, gate.stack, "approvals", "show", mine[0]["approval_id"], "--json")
    assert len(json.loads(shown.stdout)["request"]["arguments"]["content"]) == 60_002
    for item in mine:
        assert (await gate.decide("alice", item["approval_id"], approve=False))["reason_code"] == "rejected"


async def test_an_agent_lists_a_registry_of_150_tools_that_do_not_fit_one_message(gate: Any, new_id: Any) -> None:
    prefix = new_id("many_")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
    operation = {"side_effect_class": "READ_ONLY", "risk_tier": "low", "input_schema": schema, "output_schema": {}}
    for index in range(150):
        descriptor = {
            "name": f"{prefix}_{index:03d}",
            "version": "1.0.0",
            "adapter": "file_system",
            "timeout_s": 5,
            "rate_limit": {"calls": 5, "period_s": 60},
            "operations": {"look": operation},
            "description": "d" * 10_000,
        }
        published = await gate.publish_tool(descriptor)
        assert published["ok"], published
    client = await gate.client(gate.agent())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        names = [d.name for d in await client.list_tools() if d.name.startswith(prefix)]
        if len(names) == 150:
            break
        await asyncio.sleep(1.0)
    assert names == [f"{prefix}_{index:03d}" for index in range(150)]
    first = await client.list_tools_page()
    assert first.next is not None
