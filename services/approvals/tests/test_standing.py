"""A requester learns which approval its call waits on (``tg.approvals.status.<principal>``), joined ones too."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client

from effectgate.approvals.early import EarlyAnswers
from effectgate.approvals.handlers import ApprovalsRuntime, build_router
from effectgate.approvals.rebuild import Rebuilder
from effectgate.approvals.standing import status
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.runtime.assembly import RuntimeCell

AGENT = "demo-agent"


@pytest.fixture
def early(kit: Any) -> Any:
    kit.approvals.early = EarlyAnswers(kit.bus, kit.approvals.directory, kit.policy.public_key())
    return kit


async def _status(kit: Any, rid: str, principal: str = AGENT) -> Any:
    return await status(kit.approvals, principal, kit.ns + rid)


async def test_a_pending_request_names_its_own_approval_and_its_quorum(early: Any) -> None:
    await early.approvals.on_decision(early.decision("a", quorum=2))
    await early.answer("alice", "a")
    found = await _status(early, "a")
    assert (found.ok, found.reason_code, found.joined) == (True, "pending", False)
    assert found.approval_id == early.approval_id("a")
    assert (found.votes, found.approvals_required) == (("alice",), 2)


async def test_a_joined_request_names_the_approval_it_joined_and_its_end(early: Any) -> None:
    await early.approvals.on_decision(early.decision("a"))
    await early.approvals.on_decision(early.decision("b"))  # same key and arguments: joins a's approval
    joined = await _status(early, "b")
    assert (joined.reason_code, joined.approval_id, joined.joined) == ("pending", early.approval_id("a"), True)
    await early.answer("alice", "b")  # answered on the id b would have had
    assert [(s.reason_code, s.approval_id) for s in [await _status(early, "a"), await _status(early, "b")]] == [
        ("granted", early.approval_id("a")),
        ("granted", early.approval_id("a")),
    ]


async def test_an_approval_past_its_expiry_reads_expired(early: Any) -> None:
    await early.approvals.on_decision(early.decision("a"))
    early.clock.now += timedelta(minutes=5)
    assert (await _status(early, "a")).reason_code == "expired"


@pytest.mark.parametrize("stage", ["undecided", "decided_not_opened"])
async def test_a_request_whose_approval_is_not_open_yet_is_not_open(early: Any, stage: str) -> None:
    early.bus.undecided.append((AGENT, early.ns + "a"))
    if stage == "decided_not_opened":
        early.bus.decisions[(AGENT, early.ns + "a")] = early.decision("a")
    found = await _status(early, "a")
    assert (found.ok, found.reason_code, found.approval_id) == (False, "not_open", early.approval_id("a"))


@pytest.mark.parametrize("stage", ["never_sent", "decided_execute", "another_principals", "ended"])
async def test_a_request_without_an_approval_to_come_has_none(early: Any, stage: str) -> None:
    principal = AGENT
    if stage == "decided_execute":
        early.bus.undecided.append((AGENT, early.ns + "a"))
        execute = msgspec.structs.replace(early.decision("a"), verdict=Verdict.EXECUTE, signature="")
        early.bus.decisions[(AGENT, early.ns + "a")] = sign_event(execute, early.policy)
    elif stage == "another_principals":
        await early.approvals.on_decision(early.decision("a"))
        principal = "other-agent"
    elif stage == "ended":
        early.bus.undecided.append((AGENT, early.ns + "a"))
        early.bus.receipts.add(early.ns + "a")
    found = await _status(early, "a", principal)
    assert (found.ok, found.reason_code, found.approval_id) == (False, "no_approval", None)


@pytest.fixture
async def client(early: Any, nats_url: str) -> AsyncIterator[Client]:
    """The approvals service's request handlers over ``early`` on a broker of their own, and a client connection."""
    cell: RuntimeCell[ApprovalsRuntime] = RuntimeCell()
    cell.set(ApprovalsRuntime(early.approvals, Rebuilder(early.store, early.bus, early.key.public_key())))
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(cell))
    await broker.start()
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
    await broker.stop()


async def _ask(client: Client, principal: str, body: bytes) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads((await client.request(Rpc.approvals_status(principal), body, timeout=5)).data)
    return reply


async def test_on_the_bus_the_principal_is_the_subjects_last_token(early: Any, client: Client) -> None:
    await early.approvals.on_decision(early.decision("a"))
    body = json.dumps({"request_id": early.ns + "a"}).encode()
    assert (await _ask(client, "other-agent", body))["reason_code"] == "no_approval"
    own = await _ask(client, AGENT, body)
    assert (own["ok"], own["reason_code"], own["approval_id"]) == (True, "pending", early.approval_id("a"))


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"not json", "malformed"), (b'{"request_id": "a", "principal": "x"}', "malformed"), (b" " * 2000, "oversized")],
)
async def test_a_bad_status_query_is_refused_naming_why(early: Any, client: Client, body: bytes, code: str) -> None:
    reply = await _ask(client, AGENT, body)
    assert (reply["ok"], reply["reason_code"]) == (False, code)


@pytest.mark.parametrize("stage", ["undecided", "decided_not_opened"])
async def test_a_withdrawal_before_the_approval_opens_is_not_open_then_withdraws(early: Any, stage: str) -> None:
    from effectgate.approvals.withdrawal import withdraw_bytes

    body = json.dumps({"request_id": early.ns + "a"}).encode()
    early.bus.undecided.append((AGENT, early.ns + "a"))
    if stage == "decided_not_opened":
        early.bus.decisions[(AGENT, early.ns + "a")] = early.decision("a")
    told = await withdraw_bytes(early.approvals, AGENT, body)
    assert (told.ok, told.reason_code) == (False, "not_open")
    assert (await withdraw_bytes(early.approvals, "other-agent", body)).reason_code == "not_pending"
    await early.approvals.on_decision(early.decision("a"))
    done = await withdraw_bytes(early.approvals, AGENT, body)
    assert (done.ok, done.reason_code) == (True, "withdrawn")
