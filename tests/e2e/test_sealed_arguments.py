"""A secret argument (``writeOnly``) is bound and delivered, yet appears nowhere in clear.

This module's registry serves a ``file_system`` whose ``write.content`` is ``writeOnly``.
Agents seal it to the executor's ``sealing.pub`` (the stack's keys directory); calls run
directly (autonomy 2), as a replay, and through an approval. Afterwards every message of
every JetStream stream, every Redis key and value, every row of the audit database and
every service log is searched for the secrets (and their base64): none is found, while
the files the tool wrote hold them.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.nats_permissions import ADMIN, agent_user
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.integrity.sealing import SEALED_LABEL
from effectgate.sdk import SealingKeyMissing
from effectgate.sdk.client import ToolClient

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    tools = e2e_paths.state.parent / "sealed-tools"
    tools.mkdir(exist_ok=True)
    descriptor = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    descriptor["operations"]["write"]["input_schema"]["properties"]["content"]["writeOnly"] = True
    (tools / "file_system.json").write_text(json.dumps(descriptor))
    return {"EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools)}


async def _agent(gate: Any, principal: str, keys: Path | None) -> ToolClient:
    user = agent_user(principal) if gate.stack.has_user(agent_user(principal)) else ADMIN
    options = gate.stack.connect_options(user)
    return await ToolClient.connect(gate.stack.nats_url, principal, public_keys=keys, **options)


def _needles(secrets: list[str]) -> list[bytes]:
    """Each secret, its JSON form, and the base64 of both (as a byte string could be found)."""
    found = []
    for secret in secrets:
        for form in (secret.encode(), json.dumps(secret).encode()):
            found += [form, base64.b64encode(form), base64.b64encode(form).rstrip(b"=")]
    return found


async def _stream_bytes(gate: Any) -> list[bytes]:
    streams = await gate.js.streams_info()
    assert {catalog.STREAM, catalog.RESULTS_STREAM} <= {info.config.name for info in streams}
    chunks = []
    for info in streams:
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await gate.js.get_msg(info.config.name, seq)
            except Exception:  # deleted or purged sequence
                continue
            chunks.append((msg.subject or "").encode() + b"\n" + (msg.data or b"") + repr(msg.headers).encode())
    return chunks


_READ_ALL = {
    "string": ("GET",),
    "hash": ("HGETALL",),
    "list": ("LRANGE", 0, -1),
    "set": ("SMEMBERS",),
    "zset": ("ZRANGE", 0, -1, "WITHSCORES"),
    "stream": ("XRANGE", "-", "+"),
}
"""How to read a whole value of each Redis type: (command, arguments after the key)."""


async def _redis_bytes(url: str) -> list[bytes]:
    client = redis.from_url(url)
    found = []
    try:
        async for key in client.scan_iter(count=500):
            command, *rest = _READ_ALL[(await client.type(key)).decode()]
            found.append(key + b"\n" + repr(await client.execute_command(command, key, *rest)).encode())
    finally:
        await client.aclose()
    return found


def _audit_bytes(database: Path) -> list[bytes]:
    with sqlite3.connect(database) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables
        return [repr(row).encode() for table in tables for row in db.execute(f'SELECT * FROM "{table}"')]


def _log_bytes(logs: Path) -> list[bytes]:
    files = sorted(logs.glob("*.log"))
    assert {path.stem for path in files} >= {"registry", "policy", "approvals", "executor", "audit"}
    return [path.read_bytes() for path in files]


async def test_secrets_reach_the_tool_and_appear_nowhere_in_clear(gate: Any, new_id: Any) -> None:
    keys = gate.stack.public_keys
    direct, approved = "direct-SENTINEL-" + new_id(""), "approved-SENTINEL-" + new_id("")
    writer = await _agent(gate, gate.agent(2), keys)
    asker = await _agent(gate, gate.agent(1), keys)
    try:
        name, key = new_id("direct-") + ".txt", new_id("k")
        first = await writer.invoke("file_system", "write", {"path": name, "content": direct}, idempotency_key=key)
        assert first.outcome == "succeeded", first.reason
        assert (gate.paths.sandbox / name).read_text() == direct

        again = await writer.invoke("file_system", "write", {"path": name, "content": direct}, idempotency_key=key)
        assert (again.outcome, again.replay_of) == ("replayed", first.request_id)

        held = new_id("approved-") + ".txt"
        waiting = await asker.submit("file_system", "write", {"path": held, "content": approved})
        pending = await gate.pending(waiting)
        listed = pending["request"]["arguments"]
        assert listed == {"path": held, "content": SEALED_LABEL}
        assert (await gate.decide("alice", pending["approval_id"]))["ok"]
        done = await asker.receipt(waiting, timeout_s=30)
        assert done.outcome == "succeeded", done.reason
        assert (gate.paths.sandbox / held).read_text() == approved
    finally:
        await writer.close()
        await asker.close()

    await gate.settle()
    needles = _needles([direct, approved])
    places = {
        "stream": await _stream_bytes(gate),
        "redis": await _redis_bytes(gate.stack.redis_url),
        "audit": _audit_bytes(gate.stack.state_dir / "audit.sqlite3"),
        "logs": _log_bytes(gate.stack.state_dir / "logs"),
    }
    for place, chunks in places.items():
        assert chunks, f"nothing read from {place}"
        leaks = [needle for needle in needles for chunk in chunks if needle in chunk]
        assert not leaks, f"{place} holds a secret: {leaks[:3]}"
    requests = [chunk for chunk in places["stream"] if chunk.startswith(b"tg.req.")]
    assert sum(b'"$sealed"' in chunk for chunk in requests) >= 3  # the calls did carry the envelopes


async def test_without_the_executors_key_a_secret_call_is_not_sent(gate: Any, new_id: Any, tmp_path: Path) -> None:
    principal = gate.agent(2)
    receipts_only = tmp_path / "receipts-only"
    receipts_only.mkdir()
    (receipts_only / "receipts.pub").write_bytes((gate.stack.public_keys / "receipts.pub").read_bytes())
    client = await _agent(gate, principal, receipts_only)
    try:
        with pytest.raises(SealingKeyMissing, match="/content"):
            await client.invoke("file_system", "write", {"path": new_id("n-") + ".txt", "content": "never-SENTINEL"})
        listed = await client.invoke("file_system", "list", {"path": "."})  # no secret: sent as usual
        assert listed.outcome == "succeeded"
    finally:
        await client.close()
    assert await gate.count(Subjects.request(principal)) == 1


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("clear-secret", "secret_not_sealed"),
        ({"value": "clear-secret"}, "secret_not_sealed"),
        ({"$sealed": "QUJD" * 20}, "sealed_argument_invalid"),  # the shape of an envelope, but not sealed to it
    ],
)
async def test_a_request_that_bypasses_the_sdk_is_refused_naming_the_pointer(
    gate: Any, new_id: Any, content: Any, code: str
) -> None:
    principal, name, rid = gate.agent(2), new_id("raw-") + ".txt", new_id("r")
    raw = ToolRequested(
        event_id=rid,
        occurred_at=datetime.now(UTC),
        request_id=rid,
        tool="file_system",
        operation="write",
        arguments={"path": name, "content": content},
        idempotency_key=new_id("k"),
    )
    await gate.publish_raw(Subjects.request(principal), encode(raw), rid)
    issued = await gate.receipt(principal, rid)
    assert (issued.outcome, issued.reason_code) == ("refused", code), issued.reason
    assert "/content" in issued.reason and "clear-secret" not in issued.reason
    assert not (gate.paths.sandbox / name).exists()
