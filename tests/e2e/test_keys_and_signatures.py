"""Each key in one place, signed receipts believed only when real, an audit chain verifiable offline,
and descriptors published only by the operator."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.audit.domain import GENESIS, chain_hash
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import ADMIN, agent_user, approver_user
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.integrity.signing import load_private_key, sign_event, sign_value
from effectgate.contracts.vocabulary import Outcome
from effectgate.shared.config.keyring import HOLDERS
from effectgate.shared.stores.idempotency import key_digest
from effectgate.shared.stores.stream import next_message, publish_event

pytestmark = pytest.mark.e2e

SERVICES = ("registry", "policy", "approvals", "executor", "audit")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_each_running_service_is_given_only_its_own_private_key(gate: Any) -> None:
    for service in SERVICES:
        env = _environ(gate.stack.processes[service].pid)
        keys_dir = Path(env["EFFECTGATE_KEYS_DIR"])
        held = sorted(path.stem for path in keys_dir.glob("*.key"))
        own = HOLDERS[service]
        assert held == sorted(name for name in (own.signs, *own.also_holds) if name), (service, held)
        verified = sorted(path.stem for path in keys_dir.glob("*.pub") if path.stem not in held)
        assert verified == sorted(own.verifies), (service, verified)
        keys_root = str(gate.stack.state_dir / "keys")
        assert not [v for k, v in env.items() if v.rstrip("/") == keys_root], f"{service} is told the keys root"


@pytest.mark.parametrize(
    ("service", "foreign"),
    [
        ("policy", "approvals"),
        ("approvals", "policy"),
        ("executor", "policy"),
        ("audit", "receipts"),
        ("registry", "operator"),
    ],
)
def test_a_service_given_another_holders_private_key_refuses_to_start(
    gate: Any, tmp_path: Path, service: str, foreign: str
) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    for source in (gate.stack.keys_dir(service), gate.stack.keys_dir(_holder_of(foreign))):
        for path in source.iterdir():
            (keys / path.name).write_bytes(path.read_bytes())
    env = {**os.environ, "EFFECTGATE_KEYS_DIR": str(keys), "NATS_URL": "nats://127.0.0.1:1"}
    done = subprocess.run([sys.executable, "-m", f"effectgate.{service}"], env=env, capture_output=True, timeout=60)
    assert done.returncode != 0
    assert f"{foreign}.key" in done.stderr.decode(), done.stderr.decode()[-2000:]


def _holder_of(key: str) -> str:
    return next(name for name, holder in HOLDERS.items() if holder.signs == key)


async def test_an_exported_chain_verifies_offline_and_any_edit_is_named(gate: Any, new_id: Any, tmp_path: Path) -> None:
    await gate.call(gate.agent(), "list", {"path": "."})
    await gate.settle()
    export = tmp_path / "chain.jsonl"
    exported = _cli(gate, _reader(), "audit", "export", str(export))
    assert exported.returncode == 0, exported.stderr
    keys = str(gate.stack.public_keys)
    clean = _cli(gate, _reader(), "audit", "verify", "--file", str(export), "--keys", keys)
    assert clean.returncode == 0 and "intact" in clean.stdout, clean.stdout + clean.stderr

    lines = export.read_text().splitlines()
    edited = [json.loads(line) for line in lines]
    receipt_at = next(i for i, record in enumerate(edited) if record["event_type"] == "receipt.issued")
    payload = json.loads(edited[receipt_at]["payload"])
    edited[receipt_at]["payload"] = json.dumps({**payload, "outcome": "failed"})
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("\n".join(json.dumps(record) for record in edited) + "\n")
    broken = _cli(gate, _reader(), "audit", "verify", "--file", str(tampered), "--keys", keys)
    assert broken.returncode == 1 and f"record {receipt_at + 1}" in broken.stderr, broken.stderr

    no_keys = tmp_path / "no-keys"
    no_keys.mkdir()
    (no_keys / "policy.pub").write_bytes((gate.stack.public_keys / "policy.pub").read_bytes())
    keyless = _cli(gate, _reader(), "audit", "verify", "--file", str(export), "--keys", str(no_keys))
    assert keyless.returncode == 2 and "approvals.pub" in keyless.stderr and "receipts.pub" in keyless.stderr


def _forged(principal: str, request_id: str, signer: Ed25519PrivateKey | None) -> ReceiptIssued:
    receipt = ReceiptIssued(
        event_id=f"forged-{request_id}-{signer is None}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="forged",
        result={"written": "by nobody"},
    )
    return receipt if signer is None else sign_event(receipt, signer)


async def test_forged_receipts_published_first_are_ignored_and_the_real_call_still_runs(gate: Any, new_id: Any) -> None:
    agent, name = gate.agent(), new_id("forged-receipt-") + ".txt"
    client = await gate.client(agent)
    done_id = await client.submit("file_system", "list", {"path": "."})
    real_other = await client.receipt(done_id, timeout_s=20)
    request_id = await gate.submit(agent, "write", {"path": name, "content": "real"})
    pending = await gate.pending(request_id)
    subject = Subjects.receipt(agent, request_id)
    await publish_event(gate.js, subject, _forged(agent, request_id, None))
    await publish_event(gate.js, subject, _forged(agent, request_id, Ed25519PrivateKey.generate()))
    copied = msgspec.structs.replace(real_other, event_id=new_id("copied-"))
    await gate.publish_raw(subject, msgspec.json.encode(copied), new_id("copied-raw-"))

    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    issued = await client.receipt(request_id, timeout_s=20)
    assert (issued.outcome, issued.reason) == ("succeeded", issued.reason) and issued.reason != "forged"
    assert issued.request_id == request_id and issued.signature
    assert (gate.paths.sandbox / name).read_text() == "real"
    await gate.settle()
    stored = [msgspec.json.decode(m.data) for m in await _messages(gate, subject)]
    assert [r["reason"] for r in stored] == ["forged", "forged", real_other.reason, issued.reason], stored

    late = await gate.connect(agent)
    try:
        assert (await late.receipt(request_id, timeout_s=5)).reason == issued.reason, (
            "the stored receipt is the real one"
        )
    finally:
        await late.close()


async def _messages(gate: Any, subject: str) -> list[Any]:
    found, seq = [], 1
    while (message := await next_message(gate.js, subject, seq)) is not None:
        found.append(message)
        seq = message.seq + 1
    return found


async def test_another_agents_genuine_receipt_copied_onto_a_request_is_not_its_answer(gate: Any, new_id: Any) -> None:
    """A receipt the executor's key really signed, but for another principal (same request id), is ignored."""
    victim, name = gate.agent(), new_id("copied-") + ".txt"
    client = await gate.client(victim)
    request_id = await client.submit("file_system", "write", {"path": name, "content": "v"})
    pending = await gate.pending(request_id)
    executor_key = load_private_key(gate.stack.keys_dir("executor") / "receipts.key")
    theirs = sign_event(_forged(gate.agent(), request_id, None), executor_key)
    await publish_event(gate.js, Subjects.receipt(victim, request_id), theirs)

    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    issued = await client.receipt(request_id, timeout_s=20)
    assert (issued.principal, issued.operation, issued.outcome) == (victim, "write", "succeeded")
    assert (gate.paths.sandbox / name).read_text() == "v"


async def test_server_replies_aimed_at_another_agents_subjects_block_nothing(gate: Any, new_id: Any) -> None:
    """An agent aims the server's answer (its PubAck) at another agent's claim subject.

    Secured, the agent's NATS account of its own takes the answer back: nothing is stored. Open
    (one account), the answer is stored on the claim subject and the executor's claim still holds.
    """
    victim, attacker, name = gate.agent(2), gate.agent(), new_id("squat-") + ".txt"
    key = new_id("predictable-")
    claim_subject = Subjects.claim(victim, key_digest(key))
    secured = gate.stack.has_user(agent_user(attacker))
    nc = await nats.connect(
        gate.stack.nats_url, **gate.stack.connect_options(agent_user(attacker) if secured else ADMIN)
    )
    try:
        junk = json.dumps({"request_id": new_id("r"), "tool": "file_system", "operation": "list", "arguments": {}})
        await nc.publish(Subjects.request(attacker), junk.encode(), reply=claim_subject)
        await nc.flush()
    finally:
        await nc.close()
    await gate.settle()
    stored = await gate.count(claim_subject)
    if secured:
        assert stored == 0, "the server's answer to an agent left its account and was stored on a claim subject"
    else:
        assert stored >= 1, "the server's reply was not stored on the claim subject: this run tests nothing"

    issued = await gate.call(victim, "write", {"path": name, "content": "mine"}, key=key)
    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert (gate.paths.sandbox / name).read_text() == "mine"
    again = await gate.call(victim, "write", {"path": name, "content": "mine"}, key=key)
    assert again.outcome == "replayed"


def _cli(gate: Any, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NATS_URL": gate.stack.url_for(user), "EFFECTGATE_STATE_DIR": str(gate.paths.state / "no-cli")}
    if prefix := gate.stack.connect_options(user).get("inbox_prefix"):
        env["EFFECTGATE_INBOX_PREFIX"] = prefix.decode()
    command = [sys.executable, "-m", "effectgate.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def _reader() -> str:
    return approver_user("bob")


async def test_forged_signed_events_are_named_by_verify_online_and_offline(
    gate: Any, new_id: Any, tmp_path: Path
) -> None:
    principal = gate.agent()
    request_id = new_id("forged-audit-")
    await publish_event(gate.js, Subjects.receipt(principal, request_id), _forged(principal, request_id, None))
    await gate.settle()
    online = _cli(gate, _reader(), "audit", "verify")
    assert online.returncode == 1 and "signature" in online.stderr and "unsigned receipt.issued" in online.stderr
    export = tmp_path / "chain.jsonl"
    assert _cli(gate, _reader(), "audit", "export", str(export)).returncode == 0
    offline = _cli(gate, _reader(), "audit", "verify", "--file", str(export), "--keys", str(gate.stack.public_keys))
    assert offline.returncode == 1 and "unsigned receipt.issued" in offline.stderr, offline.stderr


def _rewrite_the_chain(database: Path, sequence: int, edit: Any) -> None:
    """Edit one record of the audit database as its OS user could, then recompute every hash after it."""
    with sqlite3.connect(database) as db:
        db.row_factory = sqlite3.Row
        rows = [dict(row) for row in db.execute("SELECT * FROM audit_records ORDER BY sequence")]
        rows[sequence - 1] = edit(rows[sequence - 1])
        prev = GENESIS
        for row in rows:
            row["prev_hash"], row["hash"] = prev, chain_hash(prev, row)
            prev = row["hash"]
            db.execute(
                "UPDATE audit_records SET event_type=?, payload=?, prev_hash=?, hash=? WHERE sequence=?",
                (row["event_type"], row["payload"], row["prev_hash"], row["hash"], row["sequence"]),
            )


async def test_a_rewritten_audit_database_does_not_verify_against_the_stream(gate: Any, new_id: Any) -> None:
    """Every hash recomputed, a receipt turned into an unsigned type: the stream still tells."""
    issued = await gate.call(gate.agent(), "list", {"path": "."})
    await gate.settle()
    trail = await gate.trail(issued.request_id)
    receipt = next(record for record in trail if record["event_type"] == "receipt.issued")

    def disguise(row: dict[str, Any]) -> dict[str, Any]:
        body = {**json.loads(row["payload"]), "type": "receipt.note", "outcome": "denied"}
        return {**row, "event_type": "receipt.note", "payload": json.dumps(body)}

    _rewrite_the_chain(gate.paths.state / "audit.sqlite3", receipt["sequence"], disguise)
    done = _cli(gate, _reader(), "audit", "verify")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "differ from the stream" in done.stderr and str(receipt["sequence"]) in done.stderr, done.stderr


def _read_only_file_system(gate: Any) -> dict[str, Any]:
    shipped = json.loads((Path(__file__).parents[2] / "deploy/tools/file_system.json").read_text())
    for spec in shipped["operations"].values():
        spec["side_effect_class"] = "READ_ONLY"
    return {**shipped, "version": "9.9.9"}


async def _latest_write_class(gate: Any) -> str:
    reply = await gate.rpc(Rpc.REGISTRY_GET, {"tool": "file_system"})
    return str(reply["descriptor"]["operations"]["write"]["side_effect_class"])


@pytest.mark.parametrize("signature", ["none", "foreign-key", "over-other-content"])
async def test_a_descriptor_not_signed_by_the_operator_is_refused_even_with_the_right_to_publish(
    gate: Any, signature: str
) -> None:
    descriptor = _read_only_file_system(gate)
    signed = {
        "none": "",
        "foreign-key": sign_value(descriptor, Ed25519PrivateKey.generate()),
        "over-other-content": sign_value({**descriptor, "version": "9.9.8"}, _operator_key(gate)),
    }[signature]
    data = json.dumps({"descriptor": descriptor, "signature": signed}).encode()
    reply = json.loads((await gate.nc.request(Rpc.REGISTRY_PUBLISH, data, timeout=5)).data)
    assert (reply["ok"], reply["reason_code"]) == (False, "not_operator"), reply
    assert await _latest_write_class(gate) != "READ_ONLY"
    await _security_event(gate, "publish_refused", "sha256:" + hashlib.sha256(data).hexdigest())


async def _security_event(gate: Any, kind: str, payload_sha256: str, timeout_s: float = 20.0) -> None:
    """Wait until the audit chain holds the security event of ``kind`` about this body."""
    deadline = time.monotonic() + timeout_s
    while True:
        alarms = (await gate.rpc(Rpc.AUDIT_ALARMS, {"limit": 500}))["alarms"]
        events = [alarm["event"] for alarm in alarms]
        if any((e["kind"], e.get("payload_sha256")) == (kind, payload_sha256) for e in events):
            return
        assert time.monotonic() < deadline, f"no {kind} security event recorded: {events[-3:]}"
        await asyncio.sleep(0.2)


def _operator_key(gate: Any) -> Ed25519PrivateKey:
    return load_private_key(gate.stack.keys_dir("operator") / "operator.key")


async def test_an_agent_cannot_publish_a_descriptor(gate: Any) -> None:
    """Secured: NATS refuses the agent's publish. Open (permissions missing): the registry refuses it."""
    agent = gate.agent()
    descriptor = _read_only_file_system(gate)
    body = json.dumps({"descriptor": descriptor, "signature": ""}).encode()
    secured = gate.stack.has_user(agent_user(agent))
    nc = await nats.connect(gate.stack.nats_url, **gate.stack.connect_options(agent_user(agent) if secured else ADMIN))
    try:
        if secured:
            with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
                await nc.request(Rpc.REGISTRY_PUBLISH, body, timeout=2)
        else:
            reply = json.loads((await nc.request(Rpc.REGISTRY_PUBLISH, body, timeout=5)).data)
            assert reply["reason_code"] == "not_operator", reply
    finally:
        await nc.close()
    assert await _latest_write_class(gate) != "READ_ONLY"


async def test_the_operator_publishes_with_its_key(gate: Any, tmp_path: Path) -> None:
    descriptor = {**_read_only_file_system(gate), "name": "operator_published", "version": "1.0.0"}
    path = tmp_path / "tool.json"
    path.write_text(json.dumps(descriptor))
    key = str(gate.stack.keys_dir("operator") / "operator.key")
    published = _cli(gate, ADMIN, "tools", "publish", str(path), "--key", key)
    assert published.returncode == 0 and "published" in published.stdout, published.stdout + published.stderr
    reply = await gate.rpc(Rpc.REGISTRY_GET, {"tool": "operator_published"})
    assert reply["ok"] and reply["descriptor"]["version"] == "1.0.0"
