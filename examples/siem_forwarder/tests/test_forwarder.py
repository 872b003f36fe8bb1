"""The forwarder end to end: a nats-server with the generated users, killed twice, every record exactly once.

Records are published by the services that own their subjects (signed with keys made here); the
forwarder runs as a process connected as ``auditor``, is killed (SIGKILL) once between a write and
its ack and once between a fetch and its write, then runs to the end: the file holds each audited
record once, in stream order, a forged or unsigned one flagged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client

from effectgate.cli.stack.credentials import BusCredentials, write_private
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.nats_permissions import AUDITOR, agent_user
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, DecisionMade, ReceiptIssued, encode
from effectgate.contracts.integrity.signing import generate_keypair, load_private_key, sign_event
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.devstack.servers import nats_server
from effectgate.devstack.timing import scaled
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.timing, pytest.mark.nats_2_10, pytest.mark.fault]

EXAMPLE = Path(__file__).parents[1]
DIRECTORY = PrincipalDirectory.from_toml('[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = ["ops"]\n')
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
IDLE_S = scaled(8.0)
"""Longer than the auditor consumer's ack wait (5 s): a killed run's unacked record comes back within it."""


@dataclass
class Bus:
    url: str
    folder: Path
    conns: dict[str, Client]
    keys: dict[str, Ed25519PrivateKey]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, BusCredentials]]:
    credentials, config = BusCredentials.generate(DIRECTORY)
    credentials.write_files(tmp_path / "credentials")
    with nats_server(tmp_path / "nats", config=write_private(tmp_path / "nats.conf", config)) as process:
        yield process.url, credentials


@pytest_asyncio.fixture
async def bus(server: tuple[str, BusCredentials], tmp_path: Path) -> AsyncIterator[Bus]:
    url, credentials = server
    users = ("registry", "policy", "approvals", "executor", agent_user("demo-agent"))
    conns = {user: await nats.connect(url, allow_reconnect=False, **credentials.options(user)) for user in users}
    await ensure_bus(conns["registry"].jetstream())
    for name in ("policy", "approvals", "receipts"):
        generate_keypair(tmp_path / "keys", name)
    keys = {name: load_private_key(tmp_path / "keys" / f"{name}.key") for name in ("policy", "approvals", "receipts")}
    yield Bus(url, tmp_path, conns, keys)
    for conn in conns.values():
        await conn.close()


def _decision(rid: str) -> DecisionMade:
    return DecisionMade(
        event_id=f"d-{rid}", occurred_at=AT, request_id=rid, principal="demo-agent", verdict=Verdict.EXECUTE,
        reason_code="allowed", reason="ok",
    )  # fmt: skip


def _granted(rid: str) -> ApprovalGranted:
    return ApprovalGranted(
        event_id=f"g-{rid}", occurred_at=AT, request_id=rid, principal="demo-agent", approval_id=f"a-{rid}",
        request_hash="h", approver="alice", expires_at=AT,
    )  # fmt: skip


def _rejected(rid: str) -> ApprovalRejected:
    return ApprovalRejected(
        event_id=f"j-{rid}", occurred_at=AT, request_id=rid, principal="demo-agent", approval_id=f"a-{rid}",
        reason_code="rejected", reason="no", approver="alice",
    )  # fmt: skip


def _receipt(rid: str) -> ReceiptIssued:
    return ReceiptIssued(
        event_id=f"r-{rid}", occurred_at=AT, request_id=rid, principal="demo-agent", outcome=Outcome.SUCCEEDED,
        reason_code="ok", reason="done",
    )  # fmt: skip


def _records(keys: dict[str, Ed25519PrivateKey]) -> list[tuple[str, str, bytes, str | None]]:
    """``(user, subject, data, fault)`` in publish order; ``fault`` of an audited one, ``"-"`` when not audited."""
    policy, approvals, receipts, stranger = (
        keys["policy"],
        keys["approvals"],
        keys["receipts"],
        Ed25519PrivateKey.generate(),
    )
    a = "demo-agent"
    return [
        (agent_user(a), Subjects.request(a), b'{"request_id": "r1"}', "-"),
        ("policy", Subjects.decision(a, "r1"), encode(sign_event(_decision("r1"), policy)), None),
        ("policy", Subjects.needs_approval(a, "r1"), encode(sign_event(_decision("r1"), policy)), "-"),
        ("approvals", Subjects.approval("granted", a, "r1"), encode(sign_event(_granted("r1"), approvals)), None),
        ("executor", Subjects.receipt(a, "r1"), encode(sign_event(_receipt("r1"), receipts)), None),
        ("policy", Subjects.decision(a, "r2"), encode(sign_event(_decision("r2"), policy)), None),
        ("approvals", Subjects.approval("rejected", a, "r2"), encode(sign_event(_rejected("r2"), approvals)), None),
        ("executor", Subjects.receipt(a, "r2"), encode(_receipt("r2")), "unsigned"),
        ("executor", Subjects.receipt(a, "r3"), encode(sign_event(_receipt("r3"), stranger)),
         "signature does not verify under receipts.pub"),
        ("executor", Subjects.claim(a, "k1"), b"{}", "-"),
        ("executor", Subjects.receipt(a, "r4"), encode(sign_event(_receipt("r5"), receipts)),
         "names another request than its subject"),
        ("policy", Subjects.decision(a, "r6"), encode(sign_event(_decision("r6"), policy)), None),
        ("executor", Subjects.receipt(a, "r6"), encode(sign_event(_receipt("r6"), receipts)), None),
    ]  # fmt: skip


def _forward(bus: Bus, crash: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SIEM_FORWARDER_CRASH": crash or ""}
    argv = [sys.executable, "-m", "siem_forwarder", "--out", str(bus.folder / "audit.jsonl"), "--nats-url", bus.url]
    argv += ["--credentials", str(bus.folder / "credentials" / f"{AUDITOR}.json")]
    argv += ["--public-keys", str(bus.folder / "keys"), "--idle-exit", str(IDLE_S)]
    return subprocess.run(argv, cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=IDLE_S * 4)


async def test_killed_twice_the_file_holds_every_record_once_in_stream_order_forgeries_flagged(bus: Bus) -> None:
    expected: list[tuple[int, str, str | None, Any]] = []
    for user, subject, data, fault in _records(bus.keys):
        ack = await bus.conns[user].jetstream().publish(subject, data)
        if fault != "-":
            expected.append((ack.seq, subject, fault, msgspec.json.decode(data)))
    out = bus.folder / "audit.jsonl"
    first = _forward(bus, "written:3")  # killed after its third line is on disk, before its ack
    assert (first.returncode, len(out.read_text().splitlines())) == (-9, 3), first.stderr
    second = _forward(bus, "fetched:2")  # the third comes back (acked only); killed before writing its second new one
    assert (second.returncode, len(out.read_text().splitlines())) == (-9, 4), second.stderr
    last = _forward(bus, None)
    assert last.returncode == 0, last.stderr
    lines = [msgspec.json.decode(text) for text in out.read_text().splitlines()]
    assert [(line["seq"], line["subject"], line["fault"], line["record"]) for line in lines] == expected
    assert [line["verified"] for line in lines] == [fault is None for _, _, fault, _ in expected]
    assert {(line["principal"], line["request_id"][:1]) for line in lines} == {("demo-agent", "r")}


@pytest.mark.nats_2_10
def test_without_its_consumer_the_forwarder_stops_and_says_so(
    server: tuple[str, BusCredentials], tmp_path: Path
) -> None:
    url, _ = server  # nothing provisioned: no stream, no consumer
    bus = Bus(url, tmp_path, {}, {})
    (tmp_path / "keys").mkdir()
    ended = _forward(bus, None)
    assert (ended.returncode, ended.stderr.strip()) == (
        1,
        "no consumer auditor-export on EFFECTGATE: not provisioned, or nats-server before 2.10",
    )
