"""Quorum, votes, the operator's own agent, and duplicate requests, on the real stack.

The module's policy is the shipped one plus a permit asking two operators for the
reversible writes of agents with the role ``quorum`` (``q-00``…); ``opagent`` is operated
by ``alice``. Other agents (``a1-…``) keep the shipped one-approver rule.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import ApprovalGranted, ApprovalRequested, ApprovalVoted, decode_event

pytestmark = pytest.mark.e2e

IN_MOVED_TO = 0x80
QUORUM_POLICY = """
@id("two-operators-for-quorum-agents")
@approver_role("operator")
@approvals_required("2")
permit (principal is Agent, action == Action::"execute_with_approval", resource is Tool)
when { principal.roles.contains("quorum") && context.side_effect == "REVERSIBLE_WRITE" };
"""
QUORUM_AGENTS = [f"q-{index:02d}" for index in range(10)]


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    base = e2e_paths.state.parent
    policy, principals = base / "quorum-policy.cedar", base / "quorum-principals.toml"
    policy.write_text((repo_root / "deploy/policy/policy.cedar").read_text() + QUORUM_POLICY)
    extra = [f'[principals.{name}]\nautonomy = 1\nroles = ["agent", "quorum"]\n' for name in QUORUM_AGENTS]
    extra.append('[principals.opagent]\nautonomy = 1\nroles = ["agent"]\noperator = "alice"\n')
    principals.write_text(e2e_paths.principals.read_text() + "\n" + "\n".join(extra))
    return {
        "EFFECTGATE_POLICY_POLICY_FILE": str(policy),
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(principals),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(principals),
    }


_taken: list[str] = []


def _quorum_agent() -> str:
    agent = QUORUM_AGENTS[len(_taken)]
    _taken.append(agent)
    return agent


async def _answer(gate: Any, approver: str, approval_id: str, **fields: Any) -> dict[str, Any]:
    body = {"approval_id": approval_id, "approve": True, **fields}
    return dict(await gate.rpc(Rpc.approvals_decide(approver), body, approver=approver))


async def _events(gate: Any, subject: str) -> list[Any]:
    """Every event stored on ``subject`` (wildcards allowed), in stream order."""
    found, seq = [], 1
    while True:
        try:
            message = await gate.js.get_msg("EFFECTGATE", seq=seq, subject=subject, next=True)
        except NotFoundError:
            return found
        found.append(decode_event(message.data))
        seq = message.seq + 1


async def _listed(gate: Any, approval_id: str) -> dict[str, Any]:
    listed = [item for item in await gate.approvals() if item["approval_id"] == approval_id]
    assert len(listed) == 1, listed
    return dict(listed[0])


async def test_two_distinct_approvers_meet_the_quorum_and_the_effect_runs_once(
    gate: Any, watch: Any, new_id: Any
) -> None:
    agent, name = _quorum_agent(), new_id("quorum-") + ".txt"
    watch.watch(gate.paths.sandbox)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "two said yes"})
    pending = await gate.pending(request_id)
    assert (pending["approvals_required"], pending["votes"]) == (2, [])
    assert pending["policy_id"] == "reversible-write-approval, two-operators-for-quorum-agents"

    first = await _answer(gate, "alice", pending["approval_id"])
    assert (first["ok"], first["reason_code"], first["votes"]) == (True, "voted", ["alice"])
    await gate.settle()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0, "one vote of two ran the call"
    assert (await _listed(gate, pending["approval_id"]))["votes"] == ["alice"]

    second = await _answer(gate, "bob", pending["approval_id"])
    assert (second["ok"], second["reason_code"], second["votes"]) == (True, "granted", ["alice", "bob"])
    issued = await gate.receipt(agent, request_id)
    await gate.settle()
    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert (gate.paths.sandbox / name).read_text() == "two said yes"
    assert watch.count(name, IN_MOVED_TO) == 1
    [voted] = await _events(gate, Subjects.approval("voted", agent, request_id))
    [granted] = await _events(gate, Subjects.approval("granted", agent, request_id))
    assert isinstance(voted, ApprovalVoted) and (voted.approver, voted.votes) == ("alice", ("alice",))
    assert isinstance(granted, ApprovalGranted) and (granted.approver, granted.approvers) == ("bob", ("alice", "bob"))
    assert await gate.count("tg.security.executor.*") == 0, "the executor took a vote for a forgery"
    trail = [record["event_type"] for record in await gate.trail(request_id)]
    assert "approval.voted" in trail and "approval.granted" in trail


async def test_the_same_approver_twice_does_not_meet_the_quorum(gate: Any, new_id: Any) -> None:
    agent = _quorum_agent()
    request_id = await gate.submit(agent, "write", {"path": new_id("twice-") + ".txt", "content": "x"})
    approval_id = (await gate.pending(request_id))["approval_id"]
    assert (await _answer(gate, "alice", approval_id))["reason_code"] == "voted"
    again = await _answer(gate, "alice", approval_id)
    assert (again["ok"], again["reason_code"], again["votes"]) == (True, "already_voted", ["alice"])
    await gate.settle()
    assert await gate.is_pending(request_id)
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0
    assert await gate.count(Subjects.approval("voted", agent, request_id)) == 1
    assert await gate.count(Subjects.security("approvals", "approval_refused")) == 0


async def test_one_rejection_after_one_vote_rejects(gate: Any, new_id: Any) -> None:
    agent, name = _quorum_agent(), new_id("rejected-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "x"})
    approval_id = (await gate.pending(request_id))["approval_id"]
    assert (await _answer(gate, "alice", approval_id))["reason_code"] == "voted"
    rejected = await _answer(gate, "bob", approval_id, approve=False, note="not this one")
    assert (rejected["ok"], rejected["reason_code"]) == (True, "rejected")
    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("denied", "approval_rejected")
    assert "not this one" in issued.reason and not (gate.paths.sandbox / name).exists()


async def test_a_withdrawn_vote_does_not_count(gate: Any, new_id: Any) -> None:
    agent, name = _quorum_agent(), new_id("withdrawn-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "after all"})
    approval_id = (await gate.pending(request_id))["approval_id"]
    await _answer(gate, "alice", approval_id)
    withdrawn = await _answer(gate, "alice", approval_id, approve=False, withdraw=True)
    assert (withdrawn["ok"], withdrawn["reason_code"], withdrawn["votes"]) == (True, "withdrawn", [])
    assert (await _answer(gate, "bob", approval_id))["reason_code"] == "voted"
    await gate.settle()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0, "a withdrawn vote still counted"
    assert (await _answer(gate, "alice", approval_id))["reason_code"] == "granted"
    assert (await gate.receipt(agent, request_id)).outcome == "succeeded"
    votes = await _events(gate, Subjects.approval("voted", agent, request_id))
    assert [(v.approver, v.withdrawn, v.votes) for v in votes] == [
        ("alice", False, ("alice",)),
        ("alice", True, ()),
        ("bob", False, ("bob",)),
    ]


async def test_the_person_who_operates_an_agent_cannot_approve_its_calls(gate: Any, new_id: Any) -> None:
    name = new_id("operated-") + ".txt"
    request_id = await gate.submit("opagent", "write", {"path": name, "content": "mine"})
    pending = await gate.pending(request_id)
    [requested] = await _events(gate, Subjects.approval("requested", "opagent", request_id))
    assert isinstance(requested, ApprovalRequested) and "alice" not in requested.approvers
    assert "bob" in requested.approvers

    refusals = await gate.count(Subjects.security("approvals", "approval_refused"))
    refused = await _answer(gate, "alice", pending["approval_id"])
    assert (refused["ok"], refused["reason_code"]) == (False, "self_approval")
    assert "alice operates opagent" in refused["reason"]
    deadline = time.monotonic() + 10
    while await gate.count(Subjects.security("approvals", "approval_refused")) == refusals:
        assert time.monotonic() < deadline, "the refusal was not reported"
        await asyncio.sleep(0.1)
    await gate.settle()
    assert await gate.is_pending(request_id) and not (gate.paths.sandbox / name).exists()

    assert (await _answer(gate, "bob", pending["approval_id"]))["reason_code"] == "granted"
    assert (await gate.receipt("opagent", request_id)).outcome == "succeeded"


async def test_the_same_key_sent_twice_while_pending_is_one_approval_and_one_effect(
    gate: Any, watch: Any, new_id: Any
) -> None:
    agent, name, key = gate.agent(), new_id("twice-") + ".txt", new_id("key-")
    watch.watch(gate.paths.sandbox)
    arguments = {"path": name, "content": "once"}
    first = await gate.submit(agent, "write", arguments, key=key)
    pending = await gate.pending(first)
    second = await gate.submit(agent, "write", arguments, key=key)
    deadline = time.monotonic() + 10
    while second not in (listed := await _listed(gate, pending["approval_id"]))["joined"]:
        assert time.monotonic() < deadline, "the second request did not join the pending approval"
        await asyncio.sleep(0.1)
    assert listed["idempotency_key"] == key
    mine = [item for item in await gate.approvals() if item["principal"] == agent]
    assert len(mine) == 1, "the same call under the same key opened a second approval"
    [announced] = await _events(gate, Subjects.approval("requested", agent, second))
    assert announced.approval_id == pending["approval_id"]

    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    receipts = [await gate.receipt(agent, request_id) for request_id in (first, second)]
    await gate.settle()
    assert sorted(r.outcome for r in receipts) == ["replayed", "succeeded"], [r.reason for r in receipts]
    assert len({r.effect_id for r in receipts}) == 1
    assert watch.count(name, IN_MOVED_TO) == 1, "the write ran twice"


async def test_the_same_arguments_under_a_new_key_are_a_related_approval(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("again-") + ".txt"
    arguments = {"path": name, "content": "the same"}
    first = await gate.submit(agent, "write", arguments, key=new_id("key-"))
    earlier = await gate.pending(first)
    second = await gate.submit(agent, "write", arguments, key=new_id("key-"))
    later = await gate.pending(second)
    assert later["approval_id"] != earlier["approval_id"]
    [related] = later["related"]
    assert (related["approval_id"], related["request_id"], related["state"], related["same_key"]) == (
        earlier["approval_id"],
        first,
        "pending",
        False,
    )
    [announced] = await _events(gate, Subjects.approval("requested", agent, second))
    assert [r.approval_id for r in announced.related] == [earlier["approval_id"]]

    assert (await gate.decide("alice", earlier["approval_id"]))["ok"]
    ran = await gate.receipt(agent, first)
    [now] = (await _listed(gate, later["approval_id"]))["related"]
    assert (now["state"], now["outcome"], now["receipt_id"]) == ("granted", "succeeded", ran.event_id)
    assert (await gate.decide("alice", later["approval_id"], approve=False))["ok"]
    assert (await gate.receipt(agent, second)).reason_code == "approval_rejected"
