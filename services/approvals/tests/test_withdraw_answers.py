"""The withdraw subject on real NATS: the principal is the subject's last token, never the body."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client

from effectgate.approvals.domain import ApprovalState
from effectgate.approvals.handlers import ApprovalsRuntime, build_router
from effectgate.approvals.rebuild import Rebuilder
from effectgate.contracts.bus.catalog import Rpc
from effectgate.shared.runtime.assembly import RuntimeCell


@pytest.fixture
async def client(kit: Any, nats_url: str) -> AsyncIterator[Client]:
    """The approvals service's request handlers over ``kit`` on a broker of their own, and a client connection."""
    cell: RuntimeCell[ApprovalsRuntime] = RuntimeCell()
    cell.set(ApprovalsRuntime(kit.approvals, Rebuilder(kit.store, kit.bus, kit.key.public_key())))
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(cell))
    await broker.start()
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
    await broker.stop()


async def _ask(client: Client, principal: str, body: dict[str, Any] | bytes) -> dict[str, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    reply: dict[str, Any] = json.loads((await client.request(Rpc.approvals_withdraw(principal), data, timeout=5)).data)
    return reply


async def test_only_the_subjects_principal_withdraws_its_request(kit: Any, client: Client) -> None:
    await kit.approvals.on_decision(kit.decision("a"))
    request = {"request_id": kit.ns + "a"}
    other = await _ask(client, "other-agent", request)
    assert (other["ok"], other["reason_code"]) == (False, "not_pending")
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.PENDING
    own = await _ask(client, "demo-agent", request)
    assert (own["ok"], own["reason_code"], own["approval_id"]) == (True, "withdrawn", kit.approval_id("a"))
    assert (await kit.store.get(kit.approval_id("a"))).state is ApprovalState.REJECTED


@pytest.mark.parametrize("body", [b"not json", b'{"request_id": "r1", "principal": "demo-agent"}'])
async def test_a_malformed_body_is_answered_malformed(kit: Any, client: Client, body: bytes) -> None:
    reply = await _ask(client, "demo-agent", body)
    assert (reply["ok"], reply["reason_code"]) == (False, "malformed")
