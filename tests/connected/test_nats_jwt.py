"""Operator mode (JWT) on a real nats-server: the generated accounts hold, and a revocation needs no restart.

The server runs ``server.conf`` as ``effectgate nats-jwt init`` wrote it (the full resolver,
every account preloaded); every client connects with its own ``.creds`` file. The services'
users stand in for the services (stub answers); the bus is provisioned as ``registry``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.errors import TimeoutError as NatsTimeout

from effectgate.cli.commands.nats_jwt_files import Layout, account_jwts, initialise
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_accounts import agent_account, nats_accounts
from effectgate.contracts.bus.nats_permissions import AUDITOR
from effectgate.contracts.tools.hosting import WorkerSubjects
from effectgate.devstack.servers import nats_server
from effectgate.shared.config.nats_jwt.encoding import creds_text, decode, public_key, sign, unverified
from effectgate.shared.config.nats_jwt.server import PRELOAD_FILE, preload_config
from effectgate.shared.stores.provision import ensure_bus
from tests.connected.nats_jwt_support import AGENT, OTHER, REVOKED_WITHIN_S, connect_as, init, revoke, serve_listings
from tests.deploy.test_nats_permissions import PAYMENTS, WAIT_S, WORKERS_DIRECTORY, Conn, allowed, connect, reported

pytestmark = [pytest.mark.connected, pytest.mark.timing]

USERS = ("registry", "policy", "executor", AGENT, OTHER, AUDITOR)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(url, output directory)`` of a nats-server in operator mode."""
    workdir = tmp_path_factory.mktemp("nats-jwt")
    out = init(workdir / "jwt", workdir / "resolver")
    with nats_server(workdir / "nats", config=out / "server.conf") as process:
        yield process.url, out


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, Path]) -> AsyncIterator[dict[str, Conn]]:
    url, out = server
    opened = {user: await connect_as(url, out, user) for user in USERS}
    await ensure_bus(opened["registry"].js)
    await serve_listings(opened["policy"], "demo-agent", "other-agent")
    yield opened
    for conn in opened.values():
        await conn.nc.close()


async def test_an_agent_publishes_its_request_and_a_service_answers_it(conns: dict[str, Conn]) -> None:
    ack = await conns[AGENT].js.publish(Subjects.request("demo-agent"), b"{}")
    assert ack.stream == catalog.STREAM
    answer = await conns[AGENT].nc.request(Rpc.tools_list("demo-agent"), b"{}", timeout=WAIT_S)
    assert answer.subject.startswith(f"_INBOX_{AGENT}.") and answer.data == b"{}"


@pytest.mark.parametrize("api", ["$JS.API.INFO", f"$JS.API.STREAM.INFO.{catalog.STREAM}"])
async def test_an_agent_is_refused_the_jetstream_api(conns: dict[str, Conn], api: str) -> None:
    conn = conns[AGENT]
    assert not await allowed(conn, api, conn.nc.request(api, b"", timeout=WAIT_S))


async def test_an_agent_cannot_request_as_another(conns: dict[str, Conn]) -> None:
    conn, subject = conns[AGENT], Subjects.request("other-agent")
    assert not await allowed(conn, subject, conn.js.publish(subject, b"{}"))


@pytest.mark.nats_2_10
async def test_the_auditor_pulls_its_consumer(conns: dict[str, Conn], ns: str) -> None:
    receipt = Subjects.receipt("demo-agent", ns)
    await conns["executor"].js.publish(receipt, b"{}")
    js = conns[AUDITOR].nc.jetstream(prefix=catalog.AUDITOR_JS_API)
    pull = await js.pull_subscribe_bind(catalog.AUDITOR_CONSUMER.durable, catalog.STREAM)
    seen: list[str] = []
    with contextlib.suppress(NatsTimeout):
        while receipt not in seen:
            for msg in await pull.fetch(1, timeout=WAIT_S):
                seen.append(msg.subject)
                await msg.ack_sync()
    await pull.unsubscribe()
    assert receipt in seen


async def test_another_agent_cannot_read_an_agents_receipts(conns: dict[str, Conn], ns: str) -> None:
    receipts = Subjects.receipts_of("demo-agent")
    mine = await conns[AGENT].nc.subscribe(receipts)
    theirs = await conns[OTHER].nc.subscribe(receipts)
    assert await reported(conns[OTHER], "subscription", receipts)
    await conns[AGENT].nc.flush()
    await conns["executor"].js.publish(Subjects.receipt("demo-agent", ns), b"{}")
    assert (await mine.next_msg(timeout=WAIT_S)).subject == Subjects.receipt("demo-agent", ns)
    with pytest.raises(nats.errors.TimeoutError):
        await theirs.next_msg(timeout=0.3)
    await mine.unsubscribe()


def _steal_receipts(out: Path) -> None:
    """Give other-agent's account demo-agent's receipts import (without its token) and its user the right to them."""
    layout, operator = Layout(out), Layout(out).seed("operator").read_bytes()
    victim, thief = agent_account("demo-agent"), agent_account("other-agent")
    accounts = {name: decode(token, public_key(operator)) for name, token in account_jwts(out).items()}
    imported = next(one for one in accounts[victim]["nats"]["imports"] if one["type"] == "stream")
    stolen = {key: value for key, value in imported.items() if key != "token"}
    accounts[thief]["nats"]["imports"].append(stolen)
    layout.account_jwt(thief).write_text(sign(accounts[thief], operator))
    seed = layout.seed("account", thief).read_bytes()
    user = decode(layout.creds(OTHER).read_text().split("\n")[1], public_key(seed))
    user["nats"]["sub"]["allow"].append(stolen["subject"])
    user_seed = layout.seed("user", OTHER).read_bytes()
    layout.creds(OTHER).write_text(creds_text(sign(user, seed), user_seed))
    preload = {unverified(token)["sub"]: (name, token) for name, token in account_jwts(out).items()}
    (out / PRELOAD_FILE).write_text(preload_config(preload))


async def test_an_import_copied_without_its_token_brings_nothing(tmp_path: Path, ns: str) -> None:
    """The export needs an activation token, and only the importer's account has one.

    Copying the token too would not do: it names the agent's account (``sub``), and nats-server does
    not load an account JWT whose import carries another account's token (jwt ``Import.Validate``).
    """
    out = init(tmp_path / "jwt", tmp_path / "resolver")
    _steal_receipts(out)
    with nats_server(tmp_path / "nats", config=out / "server.conf") as process:
        registry, executor = [await connect_as(process.url, out, user) for user in ("registry", "executor")]
        agent, other = await connect_as(process.url, out, AGENT), await connect_as(process.url, out, OTHER)
        await ensure_bus(registry.js)
        mine, theirs = [await conn.nc.subscribe(Subjects.receipts_of("demo-agent")) for conn in (agent, other)]
        await asyncio.gather(agent.nc.flush(), other.nc.flush())
        await executor.js.publish(Subjects.receipt("demo-agent", ns), b"{}")
        assert (await mine.next_msg(timeout=WAIT_S)).subject == Subjects.receipt("demo-agent", ns)
        with pytest.raises(nats.errors.TimeoutError):
            await theirs.next_msg(timeout=0.5)
        assert not other.errors  # its subscription was allowed: the account had nothing to deliver
        for conn in (registry, executor, agent, other):
            await conn.nc.close()


async def test_a_revoked_agent_is_disconnected_and_refused_without_a_restart(tmp_path: Path) -> None:
    out = init(tmp_path / "jwt", tmp_path / "resolver")
    with nats_server(tmp_path / "nats", config=out / "server.conf") as process:
        pid, closed = process.process.pid, asyncio.Event()
        policy = await connect_as(process.url, out, "policy")
        await serve_listings(policy, "demo-agent", "other-agent")
        agent, other = await connect_as(process.url, out, AGENT, closed), await connect_as(process.url, out, OTHER)
        await agent.nc.request(Rpc.tools_list("demo-agent"), b"{}", timeout=WAIT_S)
        started = time.monotonic()
        done = await revoke(out, AGENT, process.url)
        assert done.exit_code == 0, done.output
        await asyncio.wait_for(closed.wait(), REVOKED_WITHIN_S)
        assert time.monotonic() - started < REVOKED_WITHIN_S  # from the command's start
        assert "user authentication revoked" in str(agent.nc.last_error).lower()
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await connect_as(process.url, out, AGENT)
        assert (await other.nc.request(Rpc.tools_list("other-agent"), b"{}", timeout=WAIT_S)).data == b"{}"
        assert process.process.pid == pid and process.process.poll() is None
        for conn in (policy, other):
            await conn.nc.close()


async def test_a_worker_account_serves_its_calls_to_the_executor_and_nothing_else(tmp_path: Path, ns: str) -> None:
    """Operator mode: the worker's account exports its calls and announcements; the services' account imports them."""
    accounts = nats_accounts(WORKERS_DIRECTORY)
    initialise(accounts, tmp_path / "jwt", tmp_path / "resolver", int(time.time()))
    worker_prefix = next(u.inbox_prefix for a in accounts for u in a.users if u.name == PAYMENTS) or ""
    with nats_server(tmp_path / "nats", config=tmp_path / "jwt" / "server.conf") as process:
        creds = Layout(tmp_path / "jwt").creds
        executor = await connect(process.url, {"user_credentials": str(creds("executor"))})
        worker = await connect(process.url, {"user_credentials": str(creds(PAYMENTS)), "inbox_prefix": worker_prefix})

        async def answer(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(b"answer")

        alive = await executor.nc.subscribe(WorkerSubjects.ALIVE)
        await worker.nc.subscribe(WorkerSubjects.calls("payments"), queue=WorkerSubjects.queue("payments"), cb=answer)
        await asyncio.gather(worker.nc.flush(), executor.nc.flush())
        reply = await executor.nc.request(WorkerSubjects.call("payments", "pay"), b"call", timeout=WAIT_S)
        assert reply.data == b"answer"
        await worker.nc.publish(WorkerSubjects.alive("payments"), b"alive")
        assert (await alive.next_msg(timeout=WAIT_S)).subject == WorkerSubjects.alive("payments")
        for subject in (Subjects.request("demo-agent"), WorkerSubjects.alive("refunds"), "$JS.API.INFO"):
            await worker.nc.publish(subject, b"{}")
            assert await reported(worker, "publish", subject)
        await worker.nc.subscribe(WorkerSubjects.calls("payments"))
        assert await reported(worker, "subscription", WorkerSubjects.calls("payments"))
        for conn in (executor, worker):
            await conn.nc.close()
