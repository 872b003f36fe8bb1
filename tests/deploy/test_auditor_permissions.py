"""The read-only auditor: its own export of decisions, approval outcomes and receipts, and nothing else.

A nats-server runs the generated config (as tests/deploy/test_nats_permissions.py does); the bus is
provisioned as ``registry``; the records are published as the services that own them. A refused
publish is seen as a client sees it: a violation reported to ``error_cb``, and nothing stored.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.errors import TimeoutError as NatsTimeout

from effectgate.cli.stack.credentials import BusCredentials, write_private
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import AUDITOR, agent_user
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.devstack.servers import nats_server
from effectgate.devstack.timing import scaled
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.timing]

WAIT_S = scaled(5.0)
DIRECTORY = PrincipalDirectory.from_toml(
    """
    [principals.demo-agent]
    autonomy = 1
    [approvers.alice]
    roles = ["operator"]
    """
)
AGENT = agent_user("demo-agent")
AUDITOR_API = f"{catalog.AUDITOR_JS_API}.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.AUDITOR_CONSUMER.durable}"


class Conn:
    """One authenticated connection and the permission violations reported on it."""

    def __init__(self, nc: Client, errors: list[str]) -> None:
        self.nc, self.errors = nc, errors

    def violated(self, kind: str, subject: str) -> bool:
        needle = f'permissions violation for {kind} to "{subject.lower()}"'
        return any(needle in error for error in self.errors)

    async def reported(self, kind: str, subject: str) -> bool:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not self.violated(kind, subject):
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True


async def connect(url: str, options: dict[str, Any]) -> Conn:
    errors: list[str] = []

    async def on_error(error: Exception) -> None:
        errors.append(str(error).lower())

    return Conn(await nats.connect(url, error_cb=on_error, allow_reconnect=False, **options), errors)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BusCredentials]]:
    workdir = tmp_path_factory.mktemp("nats-auditor")
    credentials, config = BusCredentials.generate(DIRECTORY)
    with nats_server(workdir, config=write_private(workdir / "nats.conf", config)) as process:
        yield process.url, credentials


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, BusCredentials]) -> AsyncIterator[dict[str, Conn]]:
    url, credentials = server
    users = ("registry", "policy", "approvals", "executor", AGENT, AUDITOR)
    opened = {user: await connect(url, credentials.options(user)) for user in users}
    await ensure_bus(opened["registry"].nc.jetstream())
    yield opened
    for conn in opened.values():
        await conn.nc.close()


async def stored(conns: dict[str, Conn], subject: str) -> int:
    info = await conns["registry"].nc.jetstream().stream_info(catalog.STREAM, subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


def test_the_auditor_has_a_credentials_file(tmp_path: Any) -> None:
    credentials, _ = BusCredentials.generate(DIRECTORY)
    credentials.write_files(tmp_path)
    assert (tmp_path / f"{AUDITOR}.json").exists()


@pytest.mark.parametrize(
    "subject",
    [
        Subjects.request("demo-agent"),
        Subjects.decision("demo-agent", "forged"),
        Subjects.approval("granted", "demo-agent", "forged"),
        Subjects.receipt("demo-agent", "forged"),
        Subjects.security("audit", "decision_forged"),
    ],
    ids=["request", "decision", "approval", "receipt", "security"],
)
async def test_the_auditor_publishes_no_event(conns: dict[str, Conn], subject: str) -> None:
    await conns[AUDITOR].nc.publish(subject, b"{}")
    assert await conns[AUDITOR].reported("publish", subject)
    assert await stored(conns, subject) == 0


@pytest.mark.parametrize(
    "subject",
    [
        Rpc.approvals_decide("alice"),
        Rpc.APPROVALS_LIST,
        Rpc.AUDIT_TRAIL,
        Rpc.tools_list("demo-agent"),
        Rpc.REGISTRY_PUBLISH,
        f"$JS.API.STREAM.MSG.GET.{catalog.STREAM}",
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.receipt('demo-agent', 'r1')}",
        f"$JS.API.CONSUMER.CREATE.{catalog.STREAM}",
        f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.AUDIT_CONSUMER.durable}",
        f"$JS.API.STREAM.INFO.KV_{catalog.TOOLS_BUCKET}",
        f"$KV.{catalog.POLICY_BUCKET}.current",
    ],
    ids=[
        "decide",
        "approvals-list",
        "audit-trail",
        "tools-list",
        "registry",
        "msg-get",
        "direct-get",
        "create",
        "audit-consumer",
        "kv-info",
        "kv-put",
    ],
)
async def test_the_auditor_answers_no_approval_and_calls_nothing_else(conns: dict[str, Conn], subject: str) -> None:
    await conns[AUDITOR].nc.publish(subject, b"{}", reply=f"_INBOX_{AUDITOR}.x")
    assert await conns[AUDITOR].reported("publish", subject)


async def test_the_auditor_reads_no_subject_directly(conns: dict[str, Conn]) -> None:
    await conns[AUDITOR].nc.subscribe(Subjects.RECEIPTS)
    assert await conns[AUDITOR].reported("subscription", Subjects.RECEIPTS)


async def _drain(conns: dict[str, Conn]) -> list[str]:
    """Every subject the auditor's consumer delivers now, each acked."""
    js = conns[AUDITOR].nc.jetstream(prefix=catalog.AUDITOR_JS_API)
    pull = await js.pull_subscribe_bind(catalog.AUDITOR_CONSUMER.durable, catalog.STREAM)
    subjects: list[str] = []
    with contextlib.suppress(NatsTimeout):
        while True:
            for msg in await pull.fetch(1, timeout=1.0):
                subjects.append(msg.subject)
                await msg.ack_sync()
    await pull.unsubscribe()
    return subjects


@pytest.mark.nats_2_10
async def test_the_auditor_pulls_decisions_approval_outcomes_and_receipts_only(conns: dict[str, Conn], ns: str) -> None:
    await _drain(conns)
    records = [
        (AGENT, Subjects.request("demo-agent")),
        ("policy", Subjects.decision("demo-agent", ns)),
        ("policy", Subjects.needs_approval("demo-agent", ns)),
        ("approvals", Subjects.approval("requested", "demo-agent", ns)),
        ("approvals", Subjects.approval("voted", "demo-agent", ns)),
        ("approvals", Subjects.approval("granted", "demo-agent", ns)),
        ("approvals", Subjects.approval("rejected", "demo-agent", ns)),
        ("executor", Subjects.claim("demo-agent", ns)),
        ("executor", Subjects.receipt("demo-agent", ns)),
    ]
    for user, subject in records:
        await conns[user].nc.jetstream().publish(subject, b"{}")
    assert await _drain(conns) == [
        Subjects.decision("demo-agent", ns),
        Subjects.approval("granted", "demo-agent", ns),
        Subjects.approval("rejected", "demo-agent", ns),
        Subjects.receipt("demo-agent", ns),
    ]


@pytest.mark.nats_2_10
async def test_a_pull_aimed_at_an_event_subject_stores_nothing(conns: dict[str, Conn], ns: str) -> None:
    """The pull's reply subject is where the server delivers; aimed at a request subject, nothing is stored.

    nats-server does not capture a consumer's deliveries into a stream (so too without permissions): the
    auditor cannot replay a record it reads as a request of an agent.
    """
    await _drain(conns)
    await conns["executor"].nc.jetstream().publish(Subjects.receipt("demo-agent", ns), b"{}")
    victim = Subjects.request("demo-agent")
    before = await stored(conns, victim)
    await conns[AUDITOR].nc.publish(AUDITOR_API, b'{"batch": 1, "expires": 1000000000}', reply=victim)
    await conns[AUDITOR].nc.flush()
    await asyncio.sleep(1.5)
    assert await stored(conns, victim) == before
