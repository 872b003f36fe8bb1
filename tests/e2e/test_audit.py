"""Every event reaches audit, and the audit chain shows an edited record (guarantee 2 and the flow)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects

pytestmark = pytest.mark.e2e

FLOW = [
    "tool.requested",
    "decision.made",
    "decision.made",  # its copy for the approvals service, on tg.needs_approval.<p>.<rid>
    "approval.requested",
    "approval.granted",
    "effect.claimed",  # the write's durable claim, recorded before it runs
    "receipt.issued",
]


async def _stream_messages(gate: Any) -> int:
    return int((await gate.js.stream_info(catalog.STREAM)).state.messages)


async def test_approval_flow_is_audited_event_by_event(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("audited-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "audited"})
    pending = await gate.pending(request_id)
    assert (await gate.decide("bob", pending["approval_id"]))["ok"]
    assert (await gate.receipt(agent, request_id)).outcome == "succeeded"
    await gate.settle()

    trail = await gate.trail(request_id)
    assert [record["event_type"] for record in trail] == FLOW
    assert (
        trail[2]["subject"] == Subjects.needs_approval(agent, request_id) and trail[2]["payload"] == trail[1]["payload"]
    )
    assert all(record["principal"] == agent for record in trail)
    assert [r["sequence"] for r in trail] == sorted(r["sequence"] for r in trail)

    verified = await gate.rpc(Rpc.AUDIT_VERIFY, {})
    assert verified["ok"], verified
    assert verified["total"] == await _stream_messages(gate), "audit holds fewer records than the stream"
    with sqlite3.connect(gate.paths.state / "audit.sqlite3") as db:
        stream_seqs = [row[0] for row in db.execute("SELECT stream_seq FROM audit_records ORDER BY stream_seq")]
    assert stream_seqs == list(range(1, len(stream_seqs) + 1)), "an event of the stream is missing from audit"
    assert verified["missing_stream_seqs"] == [] and verified["audited_last_seq"] == verified["stream_last_seq"]


async def test_denied_and_refused_requests_are_audited_too(gate: Any) -> None:
    agent = gate.agent()
    denied = await gate.call(agent, "read", {"path": "hello.txt"}, tool="no_such_tool")
    refused = await gate.call(agent, "read", {"path": "../outside/secret.txt"})
    await gate.settle()

    for issued in (denied, refused):
        kinds = [record["event_type"] for record in await gate.trail(issued.request_id)]
        assert kinds == ["tool.requested", "decision.made", "receipt.issued"], (issued.reason_code, kinds)


async def test_verify_names_the_edited_record(gate: Any) -> None:
    agent = gate.agent()
    issued = await gate.call(agent, "read", {"path": "hello.txt"})
    await gate.settle()
    assert (await gate.rpc(Rpc.AUDIT_VERIFY, {}))["ok"]
    edited = next(r for r in await gate.trail(issued.request_id) if r["event_type"] == "receipt.issued")

    with sqlite3.connect(gate.paths.state / "audit.sqlite3", timeout=5) as db:
        db.execute(
            "UPDATE audit_records SET payload = replace(payload, 'succeeded', 'failed') WHERE sequence = ?",
            (edited["sequence"],),
        )
    verified = await gate.rpc(Rpc.AUDIT_VERIFY, {})

    assert verified["ok"] is False
    assert verified["result"]["first_broken"] == edited["sequence"]
    assert verified["result"]["reason_code"] == "hash_mismatch"
    assert f"record {edited['sequence']}" in verified["result"]["reason"]


async def test_verify_names_stream_events_that_never_reached_the_chain(gate: Any) -> None:
    await gate.call(gate.agent(), "read", {"path": "hello.txt"})
    await gate.settle()
    with sqlite3.connect(gate.paths.state / "audit.sqlite3") as db:
        (seq,) = db.execute("SELECT stream_seq FROM audit_records ORDER BY stream_seq DESC LIMIT 1 OFFSET 1").fetchone()
        db.execute("DELETE FROM audit_records WHERE stream_seq = ?", (seq,))
    verified = await gate.rpc(Rpc.AUDIT_VERIFY, {})
    assert not verified["ok"] and seq in verified["missing_stream_seqs"], verified
