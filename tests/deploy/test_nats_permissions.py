"""deploy/nats/nats.conf: the transport decides who may publish and read what.

A nats-server runs with the deploy config itself; the bus is provisioned as the
``registry`` user; every other check connects as one configured user with nats-py,
making the same calls the services and the SDK make. A refused publish is seen the
way a client sees it: a violation reported to ``error_cb``, and nothing stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from toolgate.shared import catalog
from toolgate.shared.catalog import Rpc, Subjects
from toolgate.shared.provision import ensure_bus
from toolgate.shared.servers import nats_server

pytestmark = pytest.mark.connected

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nats" / "nats.conf"
AGENT = "demo-agent"
SERVICES = ("registry", "policy", "approvals", "executor", "audit")
USERS = (*SERVICES, "operator-cli", AGENT)
SERVICE_CONSUMERS = {
    "policy": (catalog.POLICY_CONSUMER,),
    "approvals": (catalog.APPROVALS_CONSUMER,),
    "executor": (catalog.EXECUTOR_DECISIONS, catalog.EXECUTOR_APPROVALS),
    "audit": (catalog.AUDIT_CONSUMER,),
}
RESPONDERS = {
    "registry": (Rpc.REGISTRY_PUBLISH, Rpc.REGISTRY_GET, Rpc.REGISTRY_LIST),
    "approvals": (Rpc.APPROVALS_LIST, Rpc.APPROVALS_DECIDE),
    "audit": (Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY),
}
EVENTS: dict[str, tuple[Callable[[str], str], str]] = {
    # family: (subject for a fresh token, the only user that may publish it)
    "request": (lambda _: Subjects.request(AGENT), AGENT),
    "decision": (lambda rid: Subjects.decision(AGENT, rid), "policy"),
    "approval": (lambda rid: Subjects.approval("granted", AGENT, rid), "approvals"),
    "receipt": (lambda rid: Subjects.receipt(AGENT, rid), "executor"),
    "tool-published": (Subjects.tool_published, "registry"),
    "tools-kv": (lambda key: f"$KV.{catalog.TOOLS_BUCKET}.{key}", "registry"),
}
RPC_SUBJECTS = (
    *(Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET, Rpc.REGISTRY_PUBLISH, Rpc.APPROVALS_LIST, Rpc.AUDIT_TRAIL),
    *(Rpc.AUDIT_VERIFY, Rpc.approvals_decide("alice"), Rpc.approvals_decide("bob"), Rpc.approvals_decide(AGENT)),
)
MAY_CALL = {  # the operator CLI answers approvals as alice only; nobody publishes tools over RPC
    AGENT: {Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET},
    "operator-cli": set(RPC_SUBJECTS)
    - {Rpc.REGISTRY_PUBLISH, Rpc.approvals_decide("bob"), Rpc.approvals_decide(AGENT)},
}


@dataclass
class Conn:
    """One authenticated connection and the errors the server reported on it."""

    nc: Client
    errors: list[str] = field(default_factory=list)

    @property
    def js(self) -> JetStreamContext:
        return self.nc.jetstream()

    def violated(self, kind: str, subject: str) -> bool:
        needle = f'permissions violation for {kind} to "{subject.lower()}'
        return any(needle in error for error in self.errors)


def password_var(user: str) -> str:
    return f"NATS_{user.upper().replace('-', '_')}_PASSWORD"


async def connect(url: str, user: str, password: str) -> Conn:
    """Services keep the default ``_INBOX.`` prefix; every other client a private one."""
    errors: list[str] = []

    async def on_error(error: Exception) -> None:
        errors.append(str(error).lower())

    prefix = {} if user in SERVICES else {"inbox_prefix": f"_INBOX_{user}".encode()}
    nc = await nats.connect(url, user=user, password=password, error_cb=on_error, allow_reconnect=False, **prefix)
    return Conn(nc, errors)


async def allowed(conn: Conn, subject: str, action: Awaitable[Any], kind: str = "publish") -> bool:
    """``True`` when ``action`` completes; ``False`` when a violation on ``subject`` comes first."""
    task = asyncio.ensure_future(action)
    deadline = asyncio.get_running_loop().time() + 5.0
    while not task.done():
        if conn.violated(kind, subject):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            return False
        assert asyncio.get_running_loop().time() < deadline, f"neither an answer nor a violation on {subject}"
        await asyncio.sleep(0.01)
    task.result()
    return True


async def reported(conn: Conn, kind: str, subject: str, timeout_s: float = 2.0) -> bool:
    """Wait up to ``timeout_s`` seconds for a violation on ``subject``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not conn.violated(kind, subject):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def stored(conns: dict[str, Conn], subject: str) -> int:
    """How many messages the stream holding ``subject`` keeps on it (read as the registry)."""
    stream = f"KV_{catalog.TOOLS_BUCKET}" if subject.startswith("$KV.") else catalog.STREAM
    info = await conns["registry"].js.stream_info(stream, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """``(url, {user: password})``; passwords reach the config through ``$VAR`` at start only."""
    # nats-server parses $VAR values like config values: "5M…" would read as a size, so start with a letter
    passwords = {user: "pw" + secrets.token_hex(16) for user in USERS}
    with contextlib.ExitStack() as stack:
        with pytest.MonkeyPatch.context() as env:
            for user, password in passwords.items():
                env.setenv(password_var(user), password)
            process = stack.enter_context(nats_server(tmp_path_factory.mktemp("nats-deploy"), config=CONFIG))
        yield process.url, passwords


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, dict[str, str]]) -> AsyncIterator[dict[str, Conn]]:
    """A connection per user; the bus provisioned by ``registry``; stub RPC responders."""
    url, passwords = server
    opened = {user: await connect(url, user, passwords[user]) for user in USERS}
    await ensure_bus(opened["registry"].js)

    async def respond(msg: Msg) -> None:
        await msg.respond(b"{}")

    for user, subjects in RESPONDERS.items():
        for subject in subjects:
            await opened[user].nc.subscribe(subject, queue=user, cb=respond)
        await opened[user].nc.flush()
    yield opened
    for conn in opened.values():
        await conn.nc.close()


def test_config_leaves_addresses_and_storage_to_the_command_line() -> None:
    text = re.sub(r"#.*", "", CONFIG.read_text())
    assert not re.search(r"^\s*(listen|host|port|http|http_port|store_dir)\s*[:=]", text, re.M)


@pytest.mark.parametrize(("user", "password"), [(None, None), (AGENT, "wrong"), ("nobody", "x")])
async def test_unknown_or_anonymous_clients_are_refused(
    server: tuple[str, dict[str, str]], user: str | None, password: str | None
) -> None:
    async def quiet(error: Exception) -> None:
        pass

    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(server[0], user=user, password=password, error_cb=quiet, allow_reconnect=False)


async def test_agent_request_is_stored_and_acknowledged(conns: dict[str, Conn]) -> None:
    subject = Subjects.request(AGENT)
    before = await stored(conns, subject)
    ack = await conns[AGENT].js.publish(subject, b"{}", stream=catalog.STREAM)
    assert ack.stream == catalog.STREAM
    assert await stored(conns, subject) == before + 1


async def test_agent_cannot_request_as_another_principal(conns: dict[str, Conn]) -> None:
    agent, subject = conns[AGENT], Subjects.request("other-agent")
    assert not await allowed(agent, subject, agent.js.publish(subject, b"{}"))
    assert await stored(conns, subject) == 0


@pytest.mark.parametrize(("user", "family"), [(user, family) for family in EVENTS for user in USERS], ids=str)
async def test_only_the_owner_publishes_each_event_family(
    conns: dict[str, Conn], user: str, family: str, ns: str
) -> None:
    make, owner = EVENTS[family]
    subject, conn = make(ns), conns[user]
    before = await stored(conns, subject)
    assert await allowed(conn, subject, conn.js.publish(subject, b"{}")) is (user == owner)
    assert await stored(conns, subject) == before + (user == owner)


async def test_agent_receives_its_own_receipts(conns: dict[str, Conn], ns: str) -> None:
    subscription = await conns[AGENT].nc.subscribe(Subjects.receipts_of(AGENT))
    await conns[AGENT].nc.flush()
    await conns["executor"].js.publish(Subjects.receipt(AGENT, ns), b"receipt")
    assert (await subscription.next_msg(timeout=5)).subject == Subjects.receipt(AGENT, ns)
    await subscription.unsubscribe()


@pytest.mark.parametrize(
    ("pattern", "publisher", "subject"),
    [
        (Subjects.receipts_of("other-agent"), "executor", lambda rid: Subjects.receipt("other-agent", rid)),
        ("tg.decision.>", "policy", lambda rid: Subjects.decision(AGENT, rid)),
        ("tg.approval.>", "approvals", lambda rid: Subjects.approval("granted", AGENT, rid)),
        ("_INBOX.>", None, None),
    ],
)
async def test_agent_cannot_subscribe_beyond_its_receipts(
    conns: dict[str, Conn], pattern: str, publisher: str | None, subject: Callable[[str], str] | None, ns: str
) -> None:
    agent = conns[AGENT]
    subscription = await agent.nc.subscribe(pattern)
    await agent.nc.flush()
    assert await reported(agent, "subscription", pattern)
    if publisher and subject:
        await conns[publisher].js.publish(subject(ns), b"{}")
        with pytest.raises(nats.errors.TimeoutError):
            await subscription.next_msg(timeout=0.3)
    await subscription.unsubscribe()


@pytest.mark.parametrize("caller", [AGENT, "operator-cli"])
@pytest.mark.parametrize(
    "subject",
    [
        f"$JS.API.STREAM.MSG.GET.{catalog.STREAM}",  # any stored event, whoever it belongs to
        f"$JS.API.STREAM.INFO.{catalog.STREAM}",
        f"$JS.API.CONSUMER.CREATE.{catalog.STREAM}",
        f"$JS.API.CONSUMER.INFO.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}",
        f"$JS.API.STREAM.INFO.KV_{catalog.TOOLS_BUCKET}",
    ],
)
async def test_clients_get_no_jetstream_api(conns: dict[str, Conn], caller: str, subject: str) -> None:
    conn = conns[caller]
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=5))


@pytest.mark.parametrize("caller", list(MAY_CALL))
@pytest.mark.parametrize("subject", RPC_SUBJECTS)
async def test_requests_reach_services_and_replies_reach_private_inboxes(
    conns: dict[str, Conn], caller: str, subject: str
) -> None:
    conn = conns[caller]
    assert await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=5)) is (subject in MAY_CALL[caller])


@pytest.mark.parametrize(
    ("caller", "subject", "responder"),
    [
        (AGENT, Rpc.REGISTRY_LIST, "registry"),
        ("operator-cli", Rpc.APPROVALS_LIST, "approvals"),
        ("operator-cli", Rpc.AUDIT_VERIFY, "audit"),
    ],
)
async def test_a_reply_subject_cannot_borrow_the_responders_rights(
    conns: dict[str, Conn], caller: str, subject: str, responder: str, ns: str
) -> None:
    victim = Subjects.request(f"victim-{ns}")  # not allow_responses: a reply goes only to an inbox
    await conns[caller].nc.publish(subject, b"{}", reply=victim)
    await conns[caller].nc.flush()
    assert await reported(conns[responder], "publish", victim)
    assert await stored(conns, victim) == 0


def test_every_durable_consumer_has_exactly_one_service() -> None:
    owned = [spec.durable for specs in SERVICE_CONSUMERS.values() for spec in specs]
    assert sorted(owned) == sorted(spec.durable for spec in catalog.CONSUMERS)


FEEDS: dict[str | None, tuple[str, Callable[[str], str]]] = {
    # consumer filter: who puts a message there, and on which subject
    Subjects.REQUESTS: (AGENT, lambda _: Subjects.request(AGENT)),
    Subjects.DECISIONS: ("policy", lambda rid: Subjects.decision(AGENT, rid)),
    Subjects.APPROVALS: ("approvals", lambda rid: Subjects.approval("requested", AGENT, rid)),
    None: ("executor", lambda rid: Subjects.receipt(AGENT, rid)),
}


@pytest.mark.parametrize(
    ("user", "spec"), [(user, spec) for user, specs in SERVICE_CONSUMERS.items() for spec in specs], ids=str
)
async def test_service_pulls_and_acks_its_own_consumer(
    conns: dict[str, Conn], user: str, spec: catalog.ConsumerSpec, ns: str
) -> None:
    feeder, subject = FEEDS[spec.filter_subject]
    await conns[feeder].js.publish(subject(ns), b"{}")
    pull = await conns[user].js.pull_subscribe(spec.filter_subject or ">", durable=spec.durable, stream=catalog.STREAM)
    messages = await pull.fetch(100, timeout=2)
    for message in messages:
        await message.ack_sync()
    assert messages
    await pull.unsubscribe()


@pytest.mark.parametrize(
    ("user", "durable"),
    [
        *[
            (user, spec.durable)
            for user in SERVICE_CONSUMERS
            for spec in catalog.CONSUMERS
            if spec not in SERVICE_CONSUMERS[user]
        ],
        ("registry", catalog.POLICY_CONSUMER.durable),
    ],
    ids=str,
)
async def test_service_cannot_pull_from_another_consumer(conns: dict[str, Conn], user: str, durable: str) -> None:
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{durable}"
    conn = conns[user]
    assert not await allowed(conn, subject, conn.nc.request(subject, b'{"batch": 1, "no_wait": true}', timeout=5))


@pytest.mark.parametrize("user", [*SERVICES, "operator-cli", AGENT])
async def test_only_policy_and_executor_read_the_tools_bucket(conns: dict[str, Conn], user: str, ns: str) -> None:
    owner = await conns["registry"].js.key_value(catalog.TOOLS_BUCKET)
    await owner.put(f"{ns}.1", b"descriptor")

    async def read() -> None:
        assert (await (await conns[user].js.key_value(catalog.TOOLS_BUCKET)).get(f"{ns}.1")).value == b"descriptor"

    subject = f"$JS.API.STREAM.INFO.KV_{catalog.TOOLS_BUCKET}"
    expected = user in ("registry", "policy", "executor")
    assert await allowed(conns[user], subject, read()) is expected


@pytest.mark.parametrize("user", [*SERVICES, "operator-cli", AGENT])
async def test_only_the_executor_reads_decisions_by_subject(conns: dict[str, Conn], user: str, ns: str) -> None:
    subject = Subjects.decision(AGENT, ns)
    await conns["policy"].js.publish(subject, b"signed decision")

    async def read() -> None:
        assert (await conns[user].js.get_last_msg(catalog.STREAM, subject)).data == b"signed decision"

    expected = user in ("registry", "executor")
    assert await allowed(conns[user], f"$JS.API.STREAM.MSG.GET.{catalog.STREAM}", read()) is expected


@pytest.mark.parametrize("api", ["STREAM.PURGE", "STREAM.DELETE"])
async def test_registry_cannot_erase_the_event_stream(conns: dict[str, Conn], api: str) -> None:
    subject = f"$JS.API.{api}.{catalog.STREAM}"
    conn = conns["registry"]
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=5))
