"""Hostile paths and malformed or oversized messages get a clear refusal and lose nothing (guarantee 8)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats.js.errors
import pytest

from effectgate.contracts.bus.catalog import Subjects

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def _snapshot(*directories: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for d in directories for p in sorted(d.rglob("*")) if p.is_file()}


def _hostile_paths(paths: Any) -> list[str]:
    return [
        "../outside/secret.txt",
        "notes/../../outside/secret.txt",
        str(paths.outside / "secret.txt"),
        f"../{paths.sibling.name}/secret.txt",
        "escape/secret.txt",
        "escape.txt",
    ]


async def test_hostile_paths_are_refused_and_nothing_outside_is_touched(gate: Any, watch: Any) -> None:
    paths = gate.paths
    assert paths.sibling.name.startswith(paths.sandbox.name)
    before = _snapshot(paths.outside, paths.sibling)
    for directory in (paths.outside, paths.sibling):
        watch.watch(directory)

    receipts = []
    for hostile in _hostile_paths(paths):
        reader, writer = gate.agent(2), gate.agent(2)
        receipts.append((hostile, await gate.call(reader, "read", {"path": hostile})))
        receipts.append((hostile, await gate.call(writer, "write", {"path": hostile, "content": "pwned"})))
        new_file = hostile.replace("secret.txt", "created.txt")
        receipts.append((new_file, await gate.call(writer, "write", {"path": new_file, "content": "pwned"})))
    await gate.settle()

    for hostile, issued in receipts:
        assert issued.outcome == "refused", (hostile, issued.outcome, issued.reason)
        assert issued.reason_code == "path_outside_sandbox", (hostile, issued.reason_code)
        assert "path" in issued.reason and issued.result is None
    assert watch.poll() == [], "something outside the sandbox was opened, read or created"
    assert _snapshot(paths.outside, paths.sibling) == before


async def test_listing_through_an_escaping_symlink_is_refused(gate: Any) -> None:
    issued = await gate.call(gate.agent(), "list", {"path": "escape"})

    assert (issued.outcome, issued.reason_code) == ("refused", "path_outside_sandbox")


async def test_a_hard_link_to_an_outside_file_is_refused_and_nothing_is_touched(
    gate: Any, watch: Any, new_id: Any
) -> None:
    paths, name = gate.paths, new_id("linked") + ".txt"
    os.link(paths.outside / "secret.txt", paths.sandbox / name)  # made outside effectgate
    try:
        before = _snapshot(paths.outside)
        watch.watch(paths.outside)
        read = await gate.call(gate.agent(2), "read", {"path": name})
        written = await gate.call(gate.agent(2), "write", {"path": name, "content": "pwned"})
        await gate.settle()
        sandbox_names = sorted(p.name for p in paths.sandbox.iterdir() if p.name.startswith(name[:-4]))
    finally:
        os.unlink(paths.sandbox / name)

    for issued in (read, written):
        assert (issued.outcome, issued.reason_code) == ("refused", "path_outside_sandbox"), issued.reason
        assert name in issued.reason and "hard link with 2 links" in issued.reason, issued.reason
        assert issued.result is None
    assert "outside secret" not in read.reason
    assert watch.poll() == [], "something in the outside directory was opened or created"
    assert _snapshot(paths.outside) == before
    assert sandbox_names == [name], "no temporary file was left and nothing was created"


def _tool_request(request_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "tool.requested",
        "event_id": request_id,
        "occurred_at": datetime.now(UTC).isoformat(),
        "request_id": request_id,
        "tool": "file_system",
        "operation": "read",
        "arguments": {"path": "hello.txt"},
        "idempotency_key": request_id,
        **extra,
    }


def _malformed_bodies(request_id: str) -> dict[str, tuple[bytes, str, str]]:
    """name -> (body, expected reason_code, a word the reason must contain)."""
    oversized = _tool_request(request_id, arguments={"path": "hello.txt", "pad": "x" * 100_000})
    return {
        "garbage": (b"\xff\xfe\x00not json at all{{", "malformed", "JSON"),
        "wrong_shape": (b'{"hello": "world"}', "malformed", "hello"),
        "wrong_shape_with_id": (
            json.dumps({"request_id": "r-" + request_id, "tool": 42}).encode(),
            "malformed",
            "tool",
        ),
        "claims_admin": (json.dumps(_tool_request(request_id, principal="admin")).encode(), "malformed", "principal"),
        "oversized": (json.dumps(oversized).encode(), "oversized", "bytes"),
    }


@pytest.mark.parametrize("case", ["garbage", "wrong_shape", "wrong_shape_with_id", "claims_admin", "oversized"])
async def test_malformed_request_gets_a_refusal_receipt_and_is_audited(gate: Any, new_id: Any, case: str) -> None:
    agent, msg_id = gate.agent(), new_id("m")
    body, code, word = _malformed_bodies(msg_id)[case]
    await gate.publish_raw(Subjects.request(agent), body, msg_id)
    # a token-safe request_id in the body names the request; otherwise the Nats-Msg-Id does
    request_id = "r-" + msg_id if case == "wrong_shape_with_id" else msg_id

    issued = await gate.receipt(agent, request_id)
    assert (issued.outcome, issued.reason_code) == ("refused", code), issued.reason
    assert word in issued.reason, issued.reason
    assert issued.principal == agent and issued.result is None
    await gate.settle()
    assert await gate.count(Subjects.receipts_of("admin")) == 0

    trail = await gate.trail(request_id)
    subjects = [record["subject"] for record in trail]
    assert Subjects.request(agent) in subjects, f"the raw request is missing from the audit trail: {subjects}"
    assert Subjects.receipt(agent, request_id) in subjects
    receipts = [r["event_type"] for r in trail if r["subject"] == Subjects.receipt(agent, request_id)]
    assert receipts == ["receipt.issued"]


@pytest.mark.parametrize(
    ("subject", "body", "reply_to"),
    [
        ("tg.registry.get", {"tool": "nope"}, "$KV.EFFECTGATE_TOOLS.latest.file_system"),
        ("tg.registry.list", {}, "$KV.EFFECTGATE_TOOLS.file_system.9.9.9"),
        ("tg.approvals.list", {}, "tg.approval.granted.{agent}.squat"),
        ("tg.audit.verify", {}, "tg.receipt.{agent}.squat"),
        ("tg.policy.recheck", {}, "tg.decision.{agent}.squat"),
    ],
)
async def test_a_service_never_answers_onto_a_subject_the_requester_chose(
    gate: Any, subject: str, body: dict[str, Any], reply_to: str
) -> None:
    agent = gate.agent()
    target = reply_to.format(agent=agent)
    await gate.nc.publish(subject, json.dumps(body).encode(), reply=target)
    await gate.nc.flush()
    await asyncio.sleep(1.0)
    if target.startswith("$KV."):
        key = target.removeprefix("$KV.EFFECTGATE_TOOLS.")
        kv = await gate.js.key_value("EFFECTGATE_TOOLS")
        entry = await kv.get(key) if key.startswith("latest.") else None
        shipped = json.loads((REPO / "deploy" / "tools" / "file_system.json").read_text())["version"].encode()
        assert entry is None or entry.value == shipped, f"the registry wrote {entry and entry.value!r} into {key}"
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get("file_system.9.9.9")
    else:
        assert await gate.count(target) == 0, f"a service published its answer on {target}"
    issued = await gate.call(agent, "read", {"path": "hello.txt"})
    assert issued.outcome == "succeeded", issued.reason


async def test_a_stored_message_aimed_at_a_request_subject_is_refused_not_run(gate: Any, new_id: Any) -> None:
    """A direct get's reply carries the stored bytes to any reply subject: it must not be a request.

    Whoever may write a stream (a security report, a KV value) and direct-get it back could
    otherwise send a request as any agent by naming ``tg.req.<agent>`` as the reply subject.
    """
    victim, request_id = gate.agent(2), new_id("copied-")
    body = {"request_id": request_id, "tool": "file_system", "operation": "write"}
    body |= {"arguments": {"path": f"{request_id}.txt", "content": "smuggled"}, "idempotency_key": request_id}
    stored = Subjects.security("chatops", "smuggled")
    await gate.js.publish(stored, json.dumps({"type": "tool.requested", **body}).encode())
    await gate.nc.publish(f"$JS.API.DIRECT.GET.EFFECTGATE.{stored}", b"", reply=Subjects.request(victim))
    receipt = await gate.receipt(victim, request_id)
    assert (receipt.outcome, receipt.reason_code) == ("refused", "copied_stream_message")
    assert not (gate.paths.sandbox / f"{request_id}.txt").exists()


@pytest.mark.parametrize("key", ["line\nbreak", "bidi\u202eoverride", "zero\u200bwidth", "nul\x00byte"])
async def test_an_idempotency_key_with_control_or_format_characters_is_refused(
    gate: Any, new_id: Any, key: str
) -> None:
    agent = gate.agent(2)
    client = await gate.client(agent)
    receipt = await client.invoke("file_system", "list", {"path": "."}, idempotency_key=key + new_id(""))
    assert (receipt.outcome, receipt.reason_code) == ("refused", "invalid_idempotency_key")
