"""Refusals and forgeries do not vanish: each is a security event in the audit chain and an alarm.

On a real secured stack: approvers answer through their own NATS users, the test forges as
``admin``. Each refused approval answer is recorded exactly once and raises exactly one
alarm, received by an approver watching ``tg.alarm.*``; forged decisions and grants are
reported by the executor (which runs nothing) and by the audit's signature check on
intake; a reply subject the service may not publish to is reported by the service that
was refused; ``effectgate audit alarms`` lists and follows them; the chain still verifies.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import approver_user, private_inbox
from effectgate.contracts.events import ApprovalGranted, BoundRequest, DecisionMade, encode, request_hash
from effectgate.contracts.integrity.signing import load_private_key, sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.stores.stream import publish_event

pytestmark = pytest.mark.e2e

TTL_S = 10.0
"""Approvals expire after this many seconds in this module's stack."""

WATCHER = "alice"
"""The approver whose own connection watches ``tg.alarm.*``."""

Match = Callable[[dict[str, Any]], bool]


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {"EFFECTGATE_APPROVALS_TTL_S": str(TTL_S)}


@pytest_asyncio.fixture(scope="module")
async def alarms(gate: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """Every alarm an approver's own connection receives while the module runs."""
    received: list[dict[str, Any]] = []

    async def on_alarm(msg: Any) -> None:
        received.append({"subject": msg.subject, **json.loads(msg.data)})

    nc = await gate.approver(WATCHER)
    subscription = await nc.subscribe(Subjects.ALARMS, cb=on_alarm)
    await nc.request(Rpc.AUDIT_VERIFY, b"{}", timeout=10)  # the subscription is in effect
    yield received
    await subscription.unsubscribe()


async def _recorded(gate: Any, match: Match) -> list[dict[str, Any]]:
    reply = await gate.rpc(Rpc.AUDIT_ALARMS, {"limit": 500})
    assert reply["ok"], reply
    return [alarm for alarm in reply["alarms"] if match(alarm)]


async def exactly_one(gate: Any, alarms: list[dict[str, Any]], match: Match, timeout_s: float = 20.0) -> dict[str, Any]:
    """Wait for the matching security event in the chain and its alarm; then check that each is the only one."""
    deadline = time.monotonic() + timeout_s
    while not (await _recorded(gate, match) and [a for a in alarms if match(a)]):
        assert time.monotonic() < deadline, "no security event (or no alarm) for the refusal"
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # a second report would have arrived by now
    recorded, raised = await _recorded(gate, match), [a for a in alarms if match(a)]
    assert len(recorded) == 1, recorded
    assert len(raised) == 1, raised
    assert raised[0]["sequence"] == recorded[0]["sequence"]
    assert raised[0]["subject"] == Subjects.alarm(recorded[0]["event"]["kind"])
    return recorded[0]


def event_where(service: str, kind: str, **fields: Any) -> Match:
    def match(alarm: dict[str, Any]) -> bool:
        event = alarm["event"]
        return (alarm["service"], event["kind"]) == (service, kind) and all(
            event.get(k) == v for k, v in fields.items()
        )

    return match


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


async def _answer_raw(gate: Any, approver: str, data: bytes) -> dict[str, Any]:
    nc = await gate.approver(approver)
    reply = await nc.request(Rpc.approvals_decide(approver), data, timeout=10)
    return dict(json.loads(reply.data))


async def _pending_write(gate: Any, new_id: Any, principal: str | None = None) -> tuple[str, dict[str, Any], str]:
    agent, name = principal or gate.agent(), new_id("sec-") + ".txt"
    request_id = await gate.submit(agent, "write", {"path": name, "content": "only if approved"})
    return request_id, await gate.pending(request_id), name


async def _past_expiry(pending: dict[str, Any]) -> None:
    left = (datetime.fromisoformat(pending["expires_at"]) - datetime.now(UTC)).total_seconds()
    await asyncio.sleep(max(left, 0) + 1.5)


ATTEMPTS = ["unknown_approver", "not_entitled", "self_approval", "expired", "not_pending"]


@pytest.mark.parametrize("code", ATTEMPTS)
async def test_each_refused_answer_to_an_approval_is_one_event_and_one_alarm(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any, code: str
) -> None:
    request_id, pending, name = await _pending_write(gate, new_id, "selfie" if code == "self_approval" else None)
    approver = {"unknown_approver": "mallory", "not_entitled": "carol", "self_approval": "selfie"}.get(code, "alice")
    if code == "expired":
        await _past_expiry(pending)
    if code == "not_pending":
        assert (await gate.decide("bob", pending["approval_id"]))["ok"]
    reply = await gate.decide(approver, pending["approval_id"])
    assert (reply["ok"], reply["reason_code"]) == (False, code), reply

    match = event_where("approvals", "approval_refused", reason_code=code, request_id=request_id)
    alarm = await exactly_one(gate, alarms, match)
    event = alarm["event"]
    assert (event["actor"], event["approval_id"], event["principal"]) == (
        approver,
        pending["approval_id"],
        pending["principal"],
    )
    assert event["subject"] == Rpc.approvals_decide(approver)
    trail = await gate.trail(request_id)
    assert [r["sequence"] for r in trail if r["event_type"] == "security.event"] == [alarm["sequence"]]
    if code != "not_pending":
        assert not (gate.paths.sandbox / name).exists()


@pytest.mark.parametrize("code", ["unknown_approval", "malformed", "malformed_claims_admin", "oversized"])
async def test_answers_that_name_no_approval_are_one_event_and_one_alarm_each(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any, code: str
) -> None:
    approval_id = "ap-" + new_id("")[1:13]
    body = {
        "unknown_approval": json.dumps({"approval_id": approval_id, "approve": True}).encode(),
        "malformed": f'{{"approval_id": "{approval_id}", "approve": "yes please"}}'.encode(),
        "malformed_claims_admin": json.dumps({"approval_id": approval_id, "approve": True, "as": "admin"}).encode(),
        "oversized": b" " * 5000 + approval_id.encode(),
    }[code]
    reply = await _answer_raw(gate, "bob", body)
    reason_code = code.removesuffix("_claims_admin")
    assert (reply["ok"], reply["reason_code"]) == (False, reason_code), reply
    if code == "unknown_approval":
        match = event_where("approvals", "approval_refused", reason_code=reason_code, approval_id=approval_id)
    else:
        match = event_where("approvals", "approval_refused", reason_code=reason_code, payload_sha256=sha256(body))
    event = (await exactly_one(gate, alarms, match))["event"]
    assert event["actor"] == "bob"
    assert approval_id not in (event.get("detail") or "") or code == "unknown_approval"


def _forged_execute(agent: str, request_id: str, name: str) -> DecisionMade:
    bound = BoundRequest(
        principal=agent,
        tool="file_system",
        version="1.0.0",
        descriptor_digest="sha256:" + "0" * 64,
        operation="write",
        arguments={"path": name, "content": "forged"},
    )
    return DecisionMade(
        event_id=f"forged-{request_id}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=agent,
        verdict=Verdict.EXECUTE,
        reason_code="permitted",
        reason="forged",
        idempotency_key=f"k-{request_id}",
        request=bound,
        request_hash=request_hash(bound),
    )


async def _copied_decision(gate: Any, agent: str) -> bytes:
    issued = await gate.call(agent, "read", {"path": "hello.txt"})
    stored = await gate.js.get_last_msg("EFFECTGATE", Subjects.decision(agent, issued.request_id))
    return bytes(stored.data)


@pytest.mark.parametrize("forge", ["foreign_key", "unsigned", "junk", "copied"])
async def test_a_forged_decision_runs_nothing_and_is_reported_by_executor_and_audit(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any, forge: str
) -> None:
    agent, request_id, name = gate.agent(), new_id("forged"), new_id("forged-") + ".txt"
    decision = _forged_execute(agent, request_id, name)
    data = {
        "foreign_key": lambda: encode(sign_event(decision, Ed25519PrivateKey.generate())),
        "unsigned": lambda: encode(decision),
        "junk": lambda: b'{"type": "decision.made", "verdict": "execute"}',
    }.get(forge)
    body = data() if data else await _copied_decision(gate, agent)
    subject = Subjects.decision(agent, request_id)
    await gate.publish_raw(subject, body, new_id("msg-"))

    for service in ("executor", "audit"):
        match = event_where(service, "decision_forged", request_id=request_id, subject=subject)
        event = (await exactly_one(gate, alarms, match))["event"]
        assert event["principal"] == agent
    await gate.settle()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0
    assert not (gate.paths.sandbox / name).exists(), "a forged decision ran the write"


async def test_a_forged_grant_runs_nothing_and_is_reported(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any
) -> None:
    request_id, pending, name = await _pending_write(gate, new_id)
    agent, subject = pending["principal"], Subjects.approval("granted", pending["principal"], request_id)

    def grant(hash_: str, key: Ed25519PrivateKey) -> ApprovalGranted:
        event = ApprovalGranted(
            event_id=new_id("grant-"),
            occurred_at=datetime.now(UTC),
            request_id=request_id,
            principal=agent,
            approval_id=pending["approval_id"],
            request_hash=hash_,
            approver="alice",
            expires_at=datetime.fromisoformat(pending["expires_at"]),
        )
        return sign_event(event, key)

    await publish_event(gate.js, subject, grant(pending["request_hash"], Ed25519PrivateKey.generate()))
    for service in ("executor", "audit"):
        match = event_where(service, "approval_forged", request_id=request_id, subject=subject)
        await exactly_one(gate, alarms, match)

    other = BoundRequest(**{**pending["request"], "arguments": {"path": name, "content": "tampered"}})
    real_key = load_private_key(gate.stack.keys_dir("approvals") / "approvals.key")
    await publish_event(gate.js, subject, grant(request_hash(other), real_key))
    detail = "the grant binds other content than the request's decision"
    event = (await exactly_one(gate, alarms, event_where("executor", "approval_forged", detail=detail)))["event"]
    assert event["request_id"] == request_id

    await gate.settle()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0
    assert not (gate.paths.sandbox / name).exists()
    assert await gate.is_pending(request_id), "a forged grant consumed the approval"
    kinds = [json.loads(r["payload"]).get("kind") for r in await gate.trail(request_id)]
    assert kinds.count("approval_forged") == 3


@pytest.mark.parametrize(("service", "rpc"), [("registry", Rpc.REGISTRY_LIST), ("audit", Rpc.AUDIT_TRAIL)])
async def test_a_publish_the_server_refuses_a_service_is_reported_by_that_service(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any, service: str, rpc: str
) -> None:
    """A caller names a reply inbox of a user that does not exist: the service's answer is refused by the server.

    Without NATS users (``EFFECTGATE_E2E_AUTH=open``) nothing is refused, and nothing is reported.
    """
    reply_to = f"{private_inbox('ghost' + new_id(''))}.1"
    await gate.nc.publish(rpc, b'{"request_id": "r1"}', reply=reply_to)
    await gate.nc.flush()
    match = event_where(service, "permission_violation", subject=reply_to.lower())  # nats-py lowercases errors
    if not gate.stack.credentials:
        await asyncio.sleep(3.0)
        assert await _recorded(gate, match) == []
        return
    event = (await exactly_one(gate, alarms, match))["event"]
    assert (event["actor"], event["reason_code"]) == (service, "publish_refused")


def _cli(gate: Any, *args: str) -> subprocess.Popen[str]:
    user = approver_user("bob")
    env = {
        **os.environ,
        "NATS_URL": gate.stack.url_for(user),
        "EFFECTGATE_INBOX_PREFIX": private_inbox(user) if gate.stack.credentials else "_INBOX",
        "COLUMNS": "250",
    }
    command = [sys.executable, "-m", "effectgate.cli", "audit", "alarms", *args]
    return subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,  # only resets one signal disposition
    )


def _interruptible() -> None:
    """Ctrl-C stops the command even when the tests run where SIGINT is ignored (a background job inherits SIG_IGN)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def test_the_cli_lists_and_follows_alarms_and_the_chain_still_verifies(
    gate: Any, alarms: list[dict[str, Any]], new_id: Any, tmp_path: Path
) -> None:
    approval_id = "ap-" + new_id("")[1:13]
    await _answer_raw(gate, "carol", json.dumps({"approval_id": approval_id, "approve": False}).encode())
    await exactly_one(gate, alarms, event_where("approvals", "approval_refused", approval_id=approval_id))

    listed = await asyncio.to_thread(_cli(gate, "--limit", "3").communicate, timeout=60)
    assert "approval_refused" in listed[0] and approval_id in listed[0], listed

    follower = _cli(gate, "--follow", "--limit", "1")
    try:
        lines: list[str] = []
        reader = asyncio.create_task(asyncio.to_thread(_read_until, follower, lines, "following new alarms"))
        await asyncio.wait_for(reader, 60)
        later = "ap-" + new_id("")[1:13]
        await _answer_raw(gate, "carol", json.dumps({"approval_id": later, "approve": True}).encode())
        await asyncio.wait_for(asyncio.to_thread(_read_until, follower, lines, later), 30)
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=20) == 0, follower.stderr.read() if follower.stderr else ""
    finally:
        if follower.poll() is None:
            follower.kill()

    verified = await gate.rpc(Rpc.AUDIT_VERIFY, {}, timeout_s=30)
    assert verified["result"]["ok"] and not verified["missing_stream_seqs"], verified
    forged = {fault["event_type"] for fault in verified["bad_signatures"]}
    assert verified["bad_signature_count"] > 0 and forged <= {"decision.made", "approval.granted", "approval.rejected"}


def _read_until(process: subprocess.Popen[str], lines: list[str], needle: str) -> None:
    assert process.stdout is not None
    while not any(needle in line for line in lines):
        line = process.stdout.readline()
        assert line, f"the command ended before printing {needle!r}: {''.join(lines)}"
        lines.append(line)
