"""The approvals listing's clients on real NATS and Redis: the CLI and the chat-ops bot read every page.

The approvals service's request handlers over its Redis store and stream bus, and twenty
pending writes of 60 kB arguments (the case that made ``tg.approvals.list`` answer
``reply_too_large``): ``effectgate approvals list`` prints every one (and ``--summary``,
``--one-page`` and ``approvals show``), the chat-ops bot's re-sync lists them all with
their arguments; on a 64 KiB server an approval too large for one message is summarised,
and a chat card says so instead of showing no arguments.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from faststream.nats import NatsBroker
from typer.testing import CliRunner

from effectgate.approvals.adapters.redis_store import RedisApprovalStore
from effectgate.approvals.adapters.stream import StreamApprovalsBus
from effectgate.approvals.handlers import ApprovalsRuntime, build_router
from effectgate.approvals.rebuild import Rebuilder
from effectgate.approvals.service import Approvals
from effectgate.chatops.adapters.approvals_rpc import NatsApprovals
from effectgate.chatops.domain import listed_card
from effectgate.cli.app import app
from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import BoundRequest, DecisionMade, encode
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.devstack.executor_reading import no_files_read
from effectgate.devstack.servers import nats_server
from effectgate.shared.runtime.assembly import RuntimeCell
from effectgate.shared.stores.provision import ensure_bus

pytestmark = pytest.mark.connected

POLICY = Ed25519PrivateKey.generate()
DIRECTORY = PrincipalDirectory.from_toml('[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = ["ops"]\n')


@pytest.fixture(scope="module")
def small_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("small-nats")
    (root / "nats.conf").write_text("max_payload: 65536\n")
    with nats_server(root / "server", config=root / "nats.conf") as server:
        yield server.url


def _decision(ns: str, index: int, size: int) -> DecisionMade:
    rid = f"{ns}r{index:02d}"
    bound = BoundRequest(
        principal="demo-agent",
        tool="file_system",
        version="1.0.0",
        descriptor_digest="sha256:d",
        operation="write",
        arguments={"path": f"{rid}.txt", "content": f"{index:02d}" + "c" * (size - 2)},
    )
    decision = DecisionMade(
        event_id=f"d-{rid}",
        occurred_at=datetime.now(UTC),
        request_id=rid,
        principal="demo-agent",
        verdict=Verdict.NEEDS_APPROVAL,
        reason_code="approval_required",
        reason="r",
        idempotency_key=f"k-{rid}",
        request=bound,
        request_hash=f"sha256:{rid}",
        approver_role="ops",
    )
    return sign_event(decision, POLICY)


async def _serve(url: str, redis_client: aioredis.Redis, ns: str, sizes: list[int]) -> AsyncIterator[list[str]]:
    """The approvals service's handlers on ``url`` with ``sizes`` pending (fresh store); their ids, expiry order."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await ensure_bus(js)
    await redis_client.delete("tg:approvals:pending")
    await redis_client.set("tg:epoch:approvals", "test")
    clock = [datetime.now(UTC)]
    store, bus = RedisApprovalStore(redis_client), StreamApprovalsBus(nc, js)
    executor = Ed25519PrivateKey.generate()
    approvals = Approvals(
        store=store,
        bus=bus,
        directory=DIRECTORY,
        key=Ed25519PrivateKey.generate(),
        policy_key=POLICY.public_key(),
        publish=lambda subject, event: js.publish(subject, encode(event)),
        clock=lambda: clock[0],
        ttl=timedelta(minutes=10),
        executor_key=executor.public_key(),
    )
    async with no_files_read(nc, executor):
        for index, size in enumerate(sizes):
            await approvals.on_decision(_decision(ns, index, size))
            clock[0] += timedelta(seconds=1)
    broker = NatsBroker(url)
    cell: RuntimeCell[ApprovalsRuntime] = RuntimeCell()
    cell.set(ApprovalsRuntime(approvals, Rebuilder(store, bus, approvals.key.public_key())))
    broker.include_router(build_router(cell))
    await broker.start()
    yield [approval_id_for("demo-agent", f"{ns}r{index:02d}") for index in range(len(sizes))]
    await broker.stop()
    await nc.close()


async def _effectgate(url: str, state: Path, *args: str) -> Any:
    """The ``effectgate`` command (it runs its own event loop: in a thread)."""
    env = {"EFFECTGATE_STATE_DIR": str(state), "COLUMNS": "200"}
    return await asyncio.to_thread(CliRunner().invoke, app, [*args, "--nats-url", url], env=env)


async def test_the_cli_and_the_bot_read_every_page_of_twenty_60_kb_approvals(
    nats_url: str, redis_client: aioredis.Redis, ns: str, tmp_path: Path
) -> None:
    async for opened in _serve(nats_url, redis_client, ns, [60_000] * 20):
        shown = await _effectgate(nats_url, tmp_path, "approvals", "list", "--json")
        assert shown.exit_code == 0, shown.output
        listed = json.loads(shown.stdout)
        assert [item["approval_id"] for item in listed] == opened
        assert all(len(item["request"]["arguments"]["content"]) == 60_000 for item in listed)
        text = await _effectgate(nats_url, tmp_path, "approvals", "list", "--summary")
        assert text.exit_code == 0 and "20 pending approvals" in text.stdout
        assert text.stdout.count("left out: effectgate approvals show") == 20
        one = await _effectgate(nats_url, tmp_path, "approvals", "list", "--one-page", "--page-size", "3", "--json")
        assert [item["approval_id"] for item in json.loads(one.stdout)] == opened[:3]
        assert "more: effectgate approvals list --after " in one.stderr
        again = await _effectgate(nats_url, tmp_path, "approvals", "show", opened[7], "--json")
        assert json.loads(again.stdout)["request"]["arguments"]["content"].startswith("07c")
        async with await nats.connect(nats_url) as bot:
            pending = await NatsApprovals(bot).pending()
        assert [p.approval_id for p in pending] == opened and all(not p.omitted for p in pending)


async def test_on_a_64_kib_server_an_approval_too_large_for_a_message_is_summarised_for_every_client(
    small_nats: str, redis_client: aioredis.Redis, ns: str, tmp_path: Path
) -> None:
    async for opened in _serve(small_nats, redis_client, ns, [100, 63_800, 30_000, 100]):
        shown = await _effectgate(small_nats, tmp_path, "approvals", "list", "--json")
        assert shown.exit_code == 0, shown.output
        listed = json.loads(shown.stdout)
        assert [item["approval_id"] for item in listed] == opened
        assert [item["omitted"] for item in listed] == [[], ["arguments"], [], []]
        whole = await _effectgate(small_nats, tmp_path, "approvals", "show", opened[1])
        assert whole.exit_code == 0 and "arguments left out" in whole.stderr
        async with await nats.connect(small_nats) as bot:
            pending = await NatsApprovals(bot).pending()
        assert [p.approval_id for p in pending] == opened
        card = listed_card(pending[1], 2_500)
        assert "too large for one message" in card.arguments and msgspec.json.encode(card)
