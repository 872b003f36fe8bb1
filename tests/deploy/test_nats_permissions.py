"""The generated NATS permissions: the transport decides who may publish and read what.

A nats-server runs with the config :mod:`effectgate.shared.config.nats_server` renders for a small
directory (two agents, two approvers, and ``alice`` both an agent and an approver); the
bus is provisioned as the ``registry`` user; every other check connects as one user with
nats-py, making the same calls the services and the SDK make. A refused publish is seen
the way a client sees it: a violation reported to ``error_cb``, and nothing stored.
``deploy/nats/nats.conf`` is the same generator's output (tests/deploy/test_nats_config.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from effectgate.cli.stack.credentials import BusCredentials, write_private
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_accounts import js_api_of
from effectgate.contracts.bus.nats_permissions import OPERATOR, SERVICES, agent_user, approver_user, worker_user
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.hosting import WorkerSubjects
from effectgate.devstack.servers import nats_server
from effectgate.devstack.timing import scaled
from effectgate.shared.stores.provision import ensure_bus

pytestmark = [pytest.mark.connected, pytest.mark.timing]

WAIT_S = scaled(10.0)
"""How long an answer, a message or a violation may take to come from the servers (a loaded machine is slow)."""

DIRECTORY = PrincipalDirectory.from_toml(
    """
    [principals.demo-agent]
    autonomy = 1
    [principals.other-agent]
    autonomy = 1
    [principals.alice]
    autonomy = 1
    [approvers.alice]
    roles = ["operator"]
    matrix = "@alice:example.org"
    [approvers.bob]
    roles = ["operator"]
    """
)
AGENT, OTHER, ALICE_AGENT = agent_user("demo-agent"), agent_user("other-agent"), agent_user("alice")
ALICE, BOB = approver_user("alice"), approver_user("bob")
CLIENTS = (AGENT, OTHER, ALICE_AGENT, ALICE, BOB, OPERATOR)
USERS = (*SERVICES, *CLIENTS)
SERVICE_CONSUMERS = {
    "policy": (catalog.POLICY_CONSUMER, catalog.POLICY_RECEIPTS, catalog.POLICY_RESOLUTIONS),
    "approvals": (catalog.APPROVALS_CONSUMER,),
    "executor": (
        *(catalog.EXECUTOR_DECISIONS, catalog.EXECUTOR_APPROVALS, catalog.BACKSTOP_CONSUMER),
        catalog.RECONCILER_CONSUMER,
    ),
    "audit": (catalog.AUDIT_CONSUMER,),
    "chatops": (catalog.CHATOPS_APPROVALS, catalog.CHATOPS_RECEIPTS),
}
BUDGET_CALLS = (Rpc.POLICY_BUDGETS, Rpc.POLICY_BUDGETS_RESOLVE)
"""The spend ledger's counters and the resolution of an uncertain reservation: the operator's only."""
UNCERTAIN_CALLS = (Rpc.UNCERTAIN_LIST, Rpc.UNCERTAIN_RESOLVE)
"""The uncertain calls and an operator's resolution of one: the operator's only."""
RESPONDERS = {
    "registry": (Rpc.REGISTRY_PUBLISH, Rpc.REGISTRY_GET, Rpc.REGISTRY_LIST),
    "policy": (Rpc.POLICY_RECHECK, Rpc.TOOLS_LIST, Rpc.TOOLS_GET, Rpc.POLICY_READY, Rpc.POLICY_PUBLISH, *BUDGET_CALLS),
    "approvals": (
        *(Rpc.APPROVALS_LIST, Rpc.APPROVALS_SHOW, Rpc.APPROVALS_DECIDE, Rpc.APPROVALS_WITHDRAW, Rpc.APPROVALS_STATUS),
    ),
    "audit": (Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY, Rpc.AUDIT_ALARMS, Rpc.AUDIT_EXPORT, Rpc.AUDIT_REQUESTS),
    "executor": (Rpc.RECORDS_GET, *UNCERTAIN_CALLS),
}
EVENTS: dict[str, tuple[Callable[[str], str], str]] = {
    # family: (subject for a fresh token, the only user that may publish it)
    "request": (lambda _: Subjects.request("demo-agent"), AGENT),
    "decision": (lambda rid: Subjects.decision("demo-agent", rid), "policy"),
    "needs-approval": (lambda rid: Subjects.needs_approval("demo-agent", rid), "policy"),
    "approval": (lambda rid: Subjects.approval("granted", "demo-agent", rid), "approvals"),
    "receipt": (lambda rid: Subjects.receipt("demo-agent", rid), "executor"),
    "resolution": (lambda rid: Subjects.resolution("demo-agent", rid), "executor"),
    "claim": (lambda key: Subjects.claim("demo-agent", key), "executor"),
    "result": (lambda rid: Subjects.result_chunk("demo-agent", rid, 0), "executor"),
    "tool-published": (Subjects.tool_published, "registry"),
    "tool-state": (Subjects.tool_state, "executor"),
    "tools-kv": (lambda key: f"$KV.{catalog.TOOLS_BUCKET}.{key}", "registry"),
    "cards-kv": (lambda key: f"$KV.{catalog.CARDS_BUCKET}.{key}", "chatops"),
    "policy-kv": (Subjects.policy_kv, "policy"),
    "policy-published": (lambda _: Subjects.POLICY_PUBLISHED, "policy"),
    **{  # each service reports security events as itself only
        f"security-{service}": (lambda _, s=service: Subjects.security(s, "decision_forged"), service)
        for service in SERVICES
    },
}
DECIDE = {name: Rpc.approvals_decide(name) for name in ("alice", "bob", "demo-agent")}
WITHDRAW = {name: Rpc.approvals_withdraw(name) for name in ("demo-agent", "other-agent", "alice", "bob")}
STATUS = {name: Rpc.approvals_status(name) for name in ("demo-agent", "other-agent", "alice", "bob")}
RECORDS = {name: Rpc.records_get(name) for name in ("demo-agent", "other-agent", "alice", "bob")}
LISTINGS = {name: (Rpc.tools_list(name), Rpc.tools_get(name)) for name in ("demo-agent", "other-agent", "alice")}
RPC_SUBJECTS = (
    *(Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET, Rpc.REGISTRY_PUBLISH, Rpc.APPROVALS_LIST, Rpc.APPROVALS_SHOW),
    Rpc.AUDIT_TRAIL,
    *(Rpc.AUDIT_VERIFY, Rpc.AUDIT_ALARMS, Rpc.AUDIT_EXPORT, Rpc.POLICY_RECHECK, Rpc.POLICY_READY, Rpc.POLICY_PUBLISH),
    *BUDGET_CALLS,
    *UNCERTAIN_CALLS,
    Rpc.AUDIT_REQUESTS,
    *DECIDE.values(),
    *WITHDRAW.values(),
    *STATUS.values(),
    *RECORDS.values(),
    *(subject for pair in LISTINGS.values() for subject in pair),
)
OPERATOR_CALLS = {
    *(Rpc.APPROVALS_LIST, Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY, Rpc.AUDIT_ALARMS, Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET),
    Rpc.APPROVALS_SHOW,
    Rpc.POLICY_READY,
    Rpc.AUDIT_EXPORT,
    Rpc.AUDIT_REQUESTS,
}
MAY_CALL = {  # each approver answers approvals as themselves only; only the operator publishes tools
    AGENT: {*LISTINGS["demo-agent"], WITHDRAW["demo-agent"], STATUS["demo-agent"], RECORDS["demo-agent"]},  # its own
    OTHER: {*LISTINGS["other-agent"], WITHDRAW["other-agent"], STATUS["other-agent"], RECORDS["other-agent"]},
    ALICE_AGENT: {*LISTINGS["alice"], WITHDRAW["alice"], STATUS["alice"], RECORDS["alice"]},  # not alice the approver
    OPERATOR: OPERATOR_CALLS
    | {Rpc.REGISTRY_PUBLISH, Rpc.POLICY_PUBLISH, *BUDGET_CALLS, *UNCERTAIN_CALLS},  # approvers publish nothing
    ALICE: OPERATOR_CALLS | {DECIDE["alice"]},
    BOB: OPERATOR_CALLS | {DECIDE["bob"]},
    "executor": {Rpc.POLICY_RECHECK},
    "approvals": {Rpc.POLICY_RECHECK},
    "chatops": {
        Rpc.APPROVALS_LIST,
        Rpc.APPROVALS_SHOW,
        DECIDE["alice"],
    },  # only alice has a chat id: bob is never answered for
}


@dataclass
class Conn:
    """One authenticated connection and the errors the server reported on it."""

    nc: Client
    errors: list[str] = field(default_factory=list)
    user: str | None = None

    @property
    def js(self) -> JetStreamContext:
        """On the API prefix its user calls: the bot's and the operator's accounts import it under another name."""
        return self.nc.jetstream(prefix=js_api_of(self.user))

    def violated(self, kind: str, subject: str) -> bool:
        needle = f'permissions violation for {kind} to "{subject.lower()}"'  # whole: not a longer subject's
        return any(needle in error for error in self.errors)


async def connect(url: str, options: dict[str, Any]) -> Conn:
    """Services keep the default ``_INBOX.`` prefix; agents and approvers their private one."""
    errors: list[str] = []

    async def on_error(error: Exception) -> None:
        errors.append(str(error).lower())

    nc = await nats.connect(url, error_cb=on_error, allow_reconnect=False, **options)
    return Conn(nc, errors, options.get("user"))


async def allowed(conn: Conn, subject: str, action: Awaitable[Any], kind: str = "publish") -> bool:
    """``True`` when ``action`` completes; ``False`` when a violation on ``subject`` comes first."""
    task = asyncio.ensure_future(action)
    deadline = asyncio.get_running_loop().time() + WAIT_S
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


async def reported(conn: Conn, kind: str, subject: str, timeout_s: float = WAIT_S) -> bool:
    """Wait up to ``timeout_s`` seconds for a violation on ``subject``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not conn.violated(kind, subject):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def stream_of(subject: str) -> str:
    if subject.startswith("$KV."):
        return f"KV_{subject.split('.')[1]}"
    return catalog.RESULTS_STREAM if subject.startswith("tg.result.") else catalog.STREAM


async def stored(conns: dict[str, Conn], subject: str) -> int:
    """How many messages the stream holding ``subject`` keeps on it (read as the registry)."""
    info = await conns["registry"].js.stream_info(stream_of(subject), subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


@contextlib.contextmanager
def secured_server(workdir: Path, *, admin: bool) -> Iterator[tuple[str, BusCredentials]]:
    """``(url, credentials)`` of a nats-server running the config generated for :data:`DIRECTORY`."""
    credentials, config = BusCredentials.generate(DIRECTORY, admin=admin)
    with nats_server(workdir, config=write_private(workdir / "nats.conf", config)) as process:
        yield process.url, credentials


async def open_all(
    url: str, credentials: BusCredentials, users: Iterable[str], responders: dict[str, tuple[str, ...]]
) -> dict[str, Conn]:
    """A connection per user, the bus provisioned by ``registry``, and stub RPC responders (``{}``)."""
    opened = {user: await connect(url, credentials.options(user)) for user in users}
    await ensure_bus(opened["registry"].js)

    async def respond(msg: Msg) -> None:
        await msg.respond(b"{}")

    for user, subjects in responders.items():
        for subject in subjects:
            await opened[user].nc.subscribe(subject, queue=user, cb=respond)
        await opened[user].nc.flush()
    return opened


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BusCredentials]]:
    """``(url, credentials)`` of a nats-server running the generated config."""
    with secured_server(tmp_path_factory.mktemp("nats-permissions"), admin=False) as running:
        yield running


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, BusCredentials]) -> AsyncIterator[dict[str, Conn]]:
    """A connection per user; the bus provisioned by ``registry``; stub RPC responders."""
    opened = await open_all(*server, USERS, RESPONDERS)
    yield opened
    for conn in opened.values():
        await conn.nc.close()


@pytest.mark.parametrize(
    ("user", "password_of"),
    [(None, None), (AGENT, None), ("demo-agent", AGENT), ("alice", ALICE), ("admin", AGENT)],
    ids=["anonymous", "wrong-password", "bare-principal", "bare-approver", "no-admin"],
)
async def test_unknown_or_anonymous_clients_are_refused(
    server: tuple[str, BusCredentials], user: str | None, password_of: str | None
) -> None:
    async def quiet(error: Exception) -> None:
        pass

    password = server[1].passwords[password_of] if password_of else "wrong" if user else None
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(server[0], user=user, password=password, error_cb=quiet, allow_reconnect=False)


async def test_agent_request_is_stored_and_acknowledged(conns: dict[str, Conn]) -> None:
    subject = Subjects.request("demo-agent")
    before = await stored(conns, subject)
    ack = await conns[AGENT].js.publish(subject, b"{}", stream=catalog.STREAM)
    assert ack.stream == catalog.STREAM
    assert await stored(conns, subject) == before + 1


@pytest.mark.parametrize(("user", "principal"), [(AGENT, "other-agent"), (ALICE_AGENT, "bob"), (ALICE, "alice")])
async def test_nobody_requests_as_another_principal(conns: dict[str, Conn], user: str, principal: str) -> None:
    conn, subject = conns[user], Subjects.request(principal)
    assert not await allowed(conn, subject, conn.js.publish(subject, b"{}"))
    assert await stored(conns, subject) == 0


@pytest.mark.parametrize(("user", "family"), [(user, family) for family in EVENTS for user in USERS], ids=str)
async def test_only_the_owner_publishes_each_event_family(
    conns: dict[str, Conn], user: str, family: str, ns: str
) -> None:
    make, owner = EVENTS[family]
    subject, conn = make(ns), conns[user]
    before = await stored(conns, subject)
    assert await allowed(conn, subject, conn.js.publish(subject, b"{}", stream=stream_of(subject))) is (user == owner)
    assert await stored(conns, subject) == before + (user == owner)


async def in_effect(conn: Conn, via: str = Rpc.tools_list("demo-agent")) -> None:
    """Return once the server has processed every command ``conn`` sent so far.

    nats-py's ``flush()`` writes its PING straight to the socket, past SUBs still in its
    write buffer, so a PONG does not prove a subscription is active; a request's reply does
    (the request follows the SUB in the buffer, and the server handles a client in order).
    """
    await conn.nc.request(via, b"{}", timeout=WAIT_S)


async def test_agent_receives_its_own_receipts(conns: dict[str, Conn], ns: str) -> None:
    subscription = await conns[AGENT].nc.subscribe(Subjects.receipts_of("demo-agent"))
    await in_effect(conns[AGENT])
    await conns["executor"].js.publish(Subjects.receipt("demo-agent", ns), b"receipt")
    assert (await subscription.next_msg(timeout=WAIT_S)).subject == Subjects.receipt("demo-agent", ns)
    await subscription.unsubscribe()


@pytest.mark.parametrize(
    ("user", "pattern", "publisher", "subject"),
    [
        (AGENT, Subjects.receipts_of("other-agent"), "executor", lambda rid: Subjects.receipt("other-agent", rid)),
        (ALICE, Subjects.receipts_of("alice"), "executor", lambda rid: Subjects.receipt("alice", rid)),
        (AGENT, "tg.decision.>", "policy", lambda rid: Subjects.decision("demo-agent", rid)),
        (AGENT, "tg.approval.>", "approvals", lambda rid: Subjects.approval("granted", "demo-agent", rid)),
        (AGENT, "tg.claim.>", "executor", lambda key: Subjects.claim("demo-agent", key)),
        (AGENT, "tg.result.>", "executor", lambda rid: Subjects.result_chunk("demo-agent", rid, 0)),
        (AGENT, "_INBOX.>", None, None),
        (ALICE, "_INBOX.>", None, None),
        (AGENT, "tg.receipt.>", None, None),
        (OPERATOR, "tg.receipt.>", "executor", lambda rid: Subjects.receipt("demo-agent", rid)),
        (OPERATOR, "tg.>", None, None),
        (OPERATOR, "_INBOX.>", None, None),
    ],
)
async def test_clients_cannot_subscribe_beyond_their_own(
    conns: dict[str, Conn],
    user: str,
    pattern: str,
    publisher: str | None,
    subject: Callable[[str], str] | None,
    ns: str,
) -> None:
    conn = conns[user]
    subscription = await conn.nc.subscribe(pattern)
    await conn.nc.flush()
    assert await reported(conn, "subscription", pattern)
    if publisher and subject:
        await conns[publisher].js.publish(subject(ns), b"{}", stream=stream_of(subject(ns)))
        with pytest.raises(nats.errors.TimeoutError):
            await subscription.next_msg(timeout=0.3)
    await subscription.unsubscribe()


@pytest.mark.parametrize("caller", [AGENT, ALICE_AGENT, ALICE, BOB, OPERATOR])
@pytest.mark.parametrize(
    "subject",
    [
        *(Rpc.APPROVALS_DECIDE, Rpc.POLICY_RECHECK, Rpc.AUDIT_TRAIL, Rpc.REGISTRY_LIST, Rpc.POLICY_READY),
        Rpc.POLICY_PUBLISH,
        Subjects.POLICY_CURRENT,
        *(Rpc.TOOLS_LIST, Rpc.TOOLS_GET, Rpc.tools_list("demo-agent"), Rpc.tools_get("alice")),
        *(Rpc.RECORDS_GET, Rpc.records_get("demo-agent"), Rpc.EXECUTOR_CONTENTS),
        *BUDGET_CALLS,
    ],
)
async def test_clients_cannot_answer_for_a_service(conns: dict[str, Conn], caller: str, subject: str) -> None:
    """Nobody but the service takes its requests: no approving, re-checking or listing in its place."""
    conn = conns[caller]
    await conn.nc.subscribe(subject)
    await conn.nc.flush()
    assert await reported(conn, "subscription", subject)


@pytest.mark.parametrize("caller", [AGENT, ALICE, OPERATOR])
@pytest.mark.parametrize(
    "subject",
    [
        f"$JS.API.STREAM.MSG.GET.{catalog.STREAM}",  # any stored event, whoever it belongs to
        f"$JS.API.STREAM.MSG.GET.{catalog.RESULTS_STREAM}",
        f"$JS.API.STREAM.INFO.{catalog.STREAM}",
        f"$JS.API.CONSUMER.CREATE.{catalog.STREAM}",
        f"$JS.API.CONSUMER.INFO.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}",
        f"$JS.API.STREAM.INFO.KV_{catalog.TOOLS_BUCKET}",
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.decision('other-agent', 'r1')}",
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.approval('granted', 'demo-agent', 'r1')}",
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.receipt('other-agent', 'r1')}",
        f"$JS.API.DIRECT.GET.{catalog.RESULTS_STREAM}.{Subjects.result_chunk('other-agent', 'r1', 0)}",
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.receipt('demo-agent', 'r1')}",  # not even its own:
        f"$JS.API.DIRECT.GET.{catalog.STREAM}.{Subjects.decision('demo-agent', 'r1')}",  # tg.records.get.<p>
        f"$JS.API.DIRECT.GET.{catalog.RESULTS_STREAM}.{Subjects.result_chunk('demo-agent', 'r1', 0)}",
    ],
)
async def test_clients_get_no_other_jetstream_api(conns: dict[str, Conn], caller: str, subject: str) -> None:
    conn = conns[caller]
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=WAIT_S))


@pytest.mark.parametrize(("reader", "owner"), [(AGENT, "demo-agent"), (OTHER, "demo-agent"), (ALICE_AGENT, "alice")])
@pytest.mark.parametrize("kind", ["receipt", "result", "decision"])
async def test_no_agent_reads_a_record_by_direct_get_not_even_its_own(
    conns: dict[str, Conn], reader: str, owner: str, kind: str, ns: str
) -> None:
    """An agent's account has no JetStream: its stored events come by :meth:`Rpc.records_get`, from the executor."""
    subject = {
        "receipt": Subjects.receipt(owner, ns),
        "result": Subjects.result_chunk(owner, ns, 0),
        "decision": Subjects.decision(owner, ns),
    }[kind]
    writer = "policy" if kind == "decision" else "executor"
    await conns[writer].js.publish(subject, b"stored", stream=stream_of(subject))
    api = f"$JS.API.DIRECT.GET.{stream_of(subject)}.{subject}"
    read = conns[reader].js.get_last_msg(stream_of(subject), subject, direct=True)
    assert not await allowed(conns[reader], api, read)


@pytest.mark.parametrize(("caller", "victim"), [(AGENT, "other-agent"), (OTHER, "demo-agent"), (ALICE, "alice")])
async def test_nobody_asks_for_another_principals_records(conns: dict[str, Conn], caller: str, victim: str) -> None:
    """Only agent ``<p>`` asks the executor for ``<p>``'s stored records (the executor checks the subject too)."""
    conn, subject = conns[caller], Rpc.records_get(victim)
    query = b'{"subject": "%s"}' % Subjects.receipt(victim, "r1").encode()
    assert not await allowed(conn, subject, conn.nc.request(subject, query, timeout=WAIT_S))


@pytest.mark.parametrize("caller", list(MAY_CALL))
@pytest.mark.parametrize("subject", RPC_SUBJECTS)
async def test_requests_reach_services_and_replies_reach_the_caller(
    conns: dict[str, Conn], caller: str, subject: str
) -> None:
    conn = conns[caller]
    assert await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=WAIT_S)) is (
        subject in MAY_CALL[caller]
    )


@pytest.mark.parametrize(
    ("caller", "victim_of"),
    [(ALICE, "bob"), (BOB, "alice"), (ALICE_AGENT, "alice"), (AGENT, "demo-agent"), (OPERATOR, "alice")],
)
async def test_nobody_answers_an_approval_as_someone_else(conns: dict[str, Conn], caller: str, victim_of: str) -> None:
    """``alice`` the agent is not ``alice`` the approver; an approver's token is theirs alone, not the operator's."""
    conn, subject = conns[caller], Rpc.approvals_decide(victim_of)
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=WAIT_S))


@pytest.mark.parametrize(
    ("caller", "victim"),
    [(AGENT, "other-agent"), (OTHER, "demo-agent"), (ALICE, "alice"), (BOB, "demo-agent"), (OPERATOR, "demo-agent")],
)
async def test_nobody_withdraws_a_call_as_another_principal(conns: dict[str, Conn], caller: str, victim: str) -> None:
    """Only agent ``<p>`` withdraws ``<p>``'s calls: not another agent, ``alice`` the approver or the operator."""
    conn, subject = conns[caller], Rpc.approvals_withdraw(victim)
    assert not await allowed(conn, subject, conn.nc.request(subject, b'{"request_id": "r1"}', timeout=WAIT_S))


@pytest.mark.parametrize(
    ("caller", "victim"),
    [(AGENT, "other-agent"), (OTHER, "demo-agent"), (ALICE, "alice"), (BOB, "demo-agent"), (OPERATOR, "demo-agent")],
)
async def test_nobody_asks_where_another_principals_call_stands(
    conns: dict[str, Conn], caller: str, victim: str
) -> None:
    """Only agent ``<p>`` asks which approval ``<p>``'s calls wait on."""
    conn, subject = conns[caller], Rpc.approvals_status(victim)
    assert not await allowed(conn, subject, conn.nc.request(subject, b'{"request_id": "r1"}', timeout=WAIT_S))


@pytest.mark.parametrize(
    ("caller", "subject", "responder"),
    [
        ("executor", Rpc.POLICY_RECHECK, "policy"),
        ("approvals", Rpc.POLICY_RECHECK, "policy"),
    ],
)
async def test_a_reply_subject_cannot_borrow_the_responders_rights(
    conns: dict[str, Conn], caller: str, subject: str, responder: str, ns: str
) -> None:
    """Callers in the services' account (only services are); every client's reply stays in its own account
    (tests/deploy/test_nats_accounts.py, test_component_accounts.py)."""
    victim = Subjects.request(f"victim-{ns}")  # not allow_responses: a reply goes only to an inbox
    await conns[caller].nc.publish(subject, b"{}", reply=victim)
    await conns[caller].nc.flush()
    assert await reported(conns[responder], "publish", victim)
    assert await stored(conns, victim) == 0


def test_every_durable_consumer_has_exactly_one_service() -> None:
    owned = [spec.durable for specs in SERVICE_CONSUMERS.values() for spec in specs]
    owned.append(catalog.AUDITOR_CONSUMER.durable)  # the auditor's (tests/deploy/test_auditor_permissions.py)
    assert sorted(owned) == sorted(spec.durable for spec in catalog.CONSUMERS)


FEEDS: dict[str | None, tuple[str, Callable[[str], str]]] = {
    # consumer filter: who puts a message there, and on which subject
    Subjects.REQUESTS: (AGENT, lambda _: Subjects.request("demo-agent")),
    Subjects.DECISIONS: ("policy", lambda rid: Subjects.decision("demo-agent", rid)),
    Subjects.NEEDS_APPROVAL: ("policy", lambda rid: Subjects.needs_approval("demo-agent", rid)),
    Subjects.APPROVALS: ("approvals", lambda rid: Subjects.approval("requested", "demo-agent", rid)),
    Subjects.RECEIPTS: ("executor", lambda rid: Subjects.receipt("demo-agent", rid)),
    Subjects.RESOLUTIONS: ("executor", lambda rid: Subjects.resolution("demo-agent", rid)),
    None: ("executor", lambda rid: Subjects.receipt("demo-agent", rid)),
}


@pytest.mark.parametrize(
    ("user", "spec"), [(user, spec) for user, specs in SERVICE_CONSUMERS.items() for spec in specs], ids=str
)
async def test_service_pulls_and_acks_its_own_consumer(
    conns: dict[str, Conn], user: str, spec: catalog.ConsumerSpec, ns: str
) -> None:
    feeder, subject = FEEDS[spec.filter_subject]
    await conns[feeder].js.publish(subject(ns), b"{}")
    pull = await conns[user].js.pull_subscribe_bind(spec.durable, catalog.STREAM)
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
    subject = f"{js_api_of(user)}.CONSUMER.MSG.NEXT.{catalog.STREAM}.{durable}"
    conn = conns[user]
    assert not await allowed(conn, subject, conn.nc.request(subject, b'{"batch": 1, "no_wait": true}', timeout=WAIT_S))


@pytest.mark.parametrize("user", USERS)
async def test_only_policy_and_executor_read_the_tools_bucket(conns: dict[str, Conn], user: str, ns: str) -> None:
    owner = await conns["registry"].js.key_value(catalog.TOOLS_BUCKET)
    await owner.put(f"{ns}.1", b"descriptor")

    async def read() -> None:
        assert (await (await conns[user].js.key_value(catalog.TOOLS_BUCKET)).get(f"{ns}.1")).value == b"descriptor"

    subject = f"{js_api_of(user)}.STREAM.INFO.KV_{catalog.TOOLS_BUCKET}"
    assert await allowed(conns[user], subject, read()) is (user in ("registry", "policy", "executor"))


@pytest.mark.parametrize("user", USERS)
async def test_only_the_policy_service_and_the_operator_read_the_policy_bucket(
    conns: dict[str, Conn], user: str, ns: str
) -> None:
    owner = await conns["policy"].js.key_value(catalog.POLICY_BUCKET)
    await owner.put(f"v.{ns}", b"policy")

    async def read() -> None:
        assert (await (await conns[user].js.key_value(catalog.POLICY_BUCKET)).get(f"v.{ns}")).value == b"policy"

    subject = f"{js_api_of(user)}.STREAM.INFO.KV_{catalog.POLICY_BUCKET}"
    assert await allowed(conns[user], subject, read()) is (user in ("registry", "policy", OPERATOR))


async def test_every_policy_replica_sees_a_publication_as_it_is_stored(conns: dict[str, Conn], ns: str) -> None:
    watching = await conns["policy"].nc.subscribe(Subjects.POLICY_CURRENT)
    owner = await conns["policy"].js.key_value(catalog.POLICY_BUCKET)  # a reply: the subscription is in effect
    await owner.put("current", ns.encode())
    assert (await watching.next_msg(timeout=WAIT_S)).data == ns.encode()
    await watching.unsubscribe()


@pytest.mark.parametrize("user", USERS)
async def test_only_services_that_need_it_read_events_by_subject(conns: dict[str, Conn], user: str, ns: str) -> None:
    subject = Subjects.decision("demo-agent", ns)
    await conns["policy"].js.publish(subject, b"signed decision")

    async def read() -> None:
        assert (await conns[user].js.get_last_msg(catalog.STREAM, subject)).data == b"signed decision"

    expected = user in ("registry", "policy", "approvals", "executor", "audit")  # audit: verify; policy: rebuild
    assert await allowed(conns[user], f"{js_api_of(user)}.STREAM.MSG.GET.{catalog.STREAM}", read()) is expected


EXECUTOR_READS: dict[str, tuple[str, Callable[[str], str]]] = {
    # what the executor reads by direct get when a grant or a redelivery arrives
    "receipt": ("executor", lambda rid: Subjects.receipt("demo-agent", rid)),
    "decision": ("policy", lambda rid: Subjects.decision("demo-agent", rid)),
    "claim": ("executor", lambda key: Subjects.claim("demo-agent", key)),
    "approval": ("approvals", lambda rid: Subjects.approval("granted", "demo-agent", rid)),
}


@pytest.mark.parametrize("kind", list(EXECUTOR_READS))
async def test_executor_reads_events_by_direct_get(conns: dict[str, Conn], kind: str, ns: str) -> None:
    """The reproduction: a grant arrives and the executor looks up the request's receipt by subject."""
    publisher, make = EXECUTOR_READS[kind]
    subject = make(ns)
    await conns[publisher].js.publish(subject, b"event")
    executor = conns["executor"]

    async def read() -> None:  # as effectgate.shared.stores.stream.fetch_last reads
        assert (await executor.js.get_last_msg(catalog.STREAM, subject, direct=True)).data == b"event"

    assert await allowed(executor, f"$JS.API.DIRECT.GET.{catalog.STREAM}.{subject}", read())


async def test_approvals_reads_the_floor_of_the_policys_request_consumer_and_pulls_nothing(
    conns: dict[str, Conn],
) -> None:
    """An answer before its approval opens is told from an unknown id by the requests still waiting."""
    info = await conns["approvals"].js.consumer_info(catalog.STREAM, catalog.POLICY_CONSUMER.durable)
    assert info.config.durable_name == catalog.POLICY_CONSUMER.durable
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}"
    conn = conns["approvals"]
    assert not await allowed(conn, subject, conn.nc.request(subject, b'{"batch": 1, "no_wait": true}', timeout=WAIT_S))


@pytest.mark.parametrize("user", [u for u in USERS if u != "registry"])
async def test_only_audit_and_policy_read_the_stream_state(conns: dict[str, Conn], user: str) -> None:
    """Audit verifies how far the stream is ahead; policy how full it is (new requests are denied near its limit)."""
    subject = f"{js_api_of(user)}.STREAM.INFO.{catalog.STREAM}"

    async def read() -> None:
        assert (await conns[user].js.stream_info(catalog.STREAM)).config.name == catalog.STREAM

    assert await allowed(conns[user], subject, read()) is (user in ("audit", "policy"))


@pytest.mark.parametrize("api", ["STREAM.PURGE", "STREAM.DELETE"])
@pytest.mark.parametrize("stream", [catalog.STREAM, catalog.RESULTS_STREAM])
async def test_registry_cannot_erase_the_streams(conns: dict[str, Conn], api: str, stream: str) -> None:
    subject = f"$JS.API.{api}.{stream}"
    conn = conns["registry"]
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=WAIT_S))


@pytest.mark.parametrize("user", USERS)
async def test_only_the_audit_raises_alarms_and_only_approvers_watch_them(
    conns: dict[str, Conn], user: str, ns: str
) -> None:
    """Alarms are core NATS: approvers (operators) receive them, agents may not subscribe, nobody else raises one."""
    watchers = {}
    for watcher in (ALICE, BOB, AGENT):
        watchers[watcher] = await conns[watcher].nc.subscribe(Subjects.ALARMS)
        await in_effect(conns[watcher], Rpc.tools_list("demo-agent") if watcher == AGENT else Rpc.REGISTRY_LIST)
    assert await reported(conns[AGENT], "subscription", Subjects.ALARMS)
    subject, conn = Subjects.alarm(f"k{ns}"), conns[user]
    await conn.nc.publish(subject, b"alarm")
    await conn.nc.flush()
    if user == "audit":
        for watcher in (ALICE, BOB):
            assert (await watchers[watcher].next_msg(timeout=WAIT_S)).subject == subject
    else:
        assert await reported(conn, "publish", subject)
        with pytest.raises(nats.errors.TimeoutError):
            await watchers[ALICE].next_msg(timeout=0.3)
    with pytest.raises(nats.errors.TimeoutError):
        await watchers[AGENT].next_msg(timeout=0.3)
    for subscription in watchers.values():
        await subscription.unsubscribe()


@pytest.mark.parametrize("user", USERS)
async def test_only_the_executor_calls_python_tools_and_relays_their_progress(
    conns: dict[str, Conn], user: str, ns: str
) -> None:
    """Workers are sent calls by the executor alone, and only it speaks on an agent's progress subject."""
    conn = conns[user]
    subjects = (WorkerSubjects.call(ns, "bank"), Subjects.progress("demo-agent", ns))
    for subject in subjects:
        await conn.nc.publish(subject, b"{}")
    await conn.nc.flush()
    for subject in subjects:
        assert await reported(conn, "publish", subject, WAIT_S if user != "executor" else 0.5) is (user != "executor")


@pytest.mark.parametrize("user", USERS)
async def test_only_the_executor_hears_workers_announcements_and_progress(conns: dict[str, Conn], user: str) -> None:
    conn = conns[user]
    patterns = (WorkerSubjects.ALIVE, WorkerSubjects.progress("*", "*"))
    subscriptions = [await conn.nc.subscribe(pattern) for pattern in patterns]
    await conn.nc.flush()
    for pattern in patterns:
        expected = user != "executor"
        assert await reported(conn, "subscription", pattern, WAIT_S if expected else 0.5) is expected
    for subscription in subscriptions:
        await subscription.unsubscribe()


@pytest.mark.parametrize("user", USERS)
async def test_only_the_executor_publishes_progress_and_only_its_agent_hears_it(
    conns: dict[str, Conn], user: str, ns: str
) -> None:
    """Progress is core NATS: agent ``<p>`` (and the MCP surface, acting as ``<p>``) hears ``<p>``'s; none forges it."""
    mine = await conns[AGENT].nc.subscribe(Subjects.progress_of("demo-agent"))
    await in_effect(conns[AGENT])
    theirs = await conns[OTHER].nc.subscribe(Subjects.progress_of("demo-agent"))
    await in_effect(conns[OTHER], Rpc.tools_list("other-agent"))
    assert await reported(conns[OTHER], "subscription", Subjects.progress_of("demo-agent"))
    subject, conn = Subjects.progress("demo-agent", ns), conns[user]
    await conn.nc.publish(subject, b'{"request_id": "r1", "items": 1}')
    await conn.nc.flush()
    if user == "executor":
        assert (await mine.next_msg(timeout=WAIT_S)).subject == subject
    else:
        assert await reported(conn, "publish", subject)
        with pytest.raises(nats.errors.TimeoutError):
            await mine.next_msg(timeout=0.3)
    with pytest.raises(nats.errors.TimeoutError):
        await theirs.next_msg(timeout=0.3)
    for subscription in (mine, theirs):
        await subscription.unsubscribe()


# --- tool workers: each in an account of its own, serving only its own calls ---------------------

WORKERS_DIRECTORY = dataclasses.replace(DIRECTORY, workers=frozenset({"payments", "refunds"}))
PAYMENTS, REFUNDS = worker_user("payments"), worker_user("refunds")


@pytest_asyncio.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Conn]]:
    """The executor, an agent, the operator and two workers on a server whose directory declares the workers."""
    workdir = tmp_path_factory.mktemp("nats-workers")
    credentials, config = BusCredentials.generate(WORKERS_DIRECTORY)
    with nats_server(workdir, config=write_private(workdir / "nats.conf", config)) as process:
        users = ("registry", "executor", AGENT, OPERATOR, PAYMENTS, REFUNDS)
        opened = await open_all(process.url, credentials, users, {})
        yield opened
        for conn in opened.values():
            await conn.nc.close()


async def test_a_worker_takes_its_calls_in_its_queue_group_answers_them_and_announces(
    served: dict[str, Conn], ns: str
) -> None:
    executor, worker = served["executor"], served[PAYMENTS]

    async def answer(msg: Msg) -> None:
        await worker.nc.publish(WorkerSubjects.progress("payments", ns), b"progress")
        await msg.respond(b"answer")

    alive = await executor.nc.subscribe(WorkerSubjects.ALIVE)
    progress = await executor.nc.subscribe(WorkerSubjects.progress("*", "*"))
    await worker.nc.subscribe(WorkerSubjects.calls("payments"), queue=WorkerSubjects.queue("payments"), cb=answer)
    await worker.nc.flush()
    await executor.nc.flush()
    reply = await executor.nc.request(WorkerSubjects.call("payments", "pay"), b"call", timeout=WAIT_S)
    assert reply.data == b"answer"
    assert (await progress.next_msg(timeout=WAIT_S)).subject == WorkerSubjects.progress("payments", ns)
    await worker.nc.publish(WorkerSubjects.alive("payments"), b"alive")
    assert (await alive.next_msg(timeout=WAIT_S)).subject == WorkerSubjects.alive("payments")
    assert not worker.errors


@pytest.mark.parametrize(
    "subject",
    [
        Subjects.request("demo-agent"),
        Subjects.receipt("demo-agent", "r1"),
        Subjects.decision("demo-agent", "r1"),
        Subjects.claim("demo-agent", "k1"),
        WorkerSubjects.call("refunds", "refund"),
        WorkerSubjects.call("payments", "pay"),
        WorkerSubjects.alive("refunds"),
        WorkerSubjects.progress("refunds", "c1"),
        Rpc.REGISTRY_LIST,
        Rpc.records_get("demo-agent"),
        f"$JS.API.STREAM.INFO.{catalog.STREAM}",
        "$JS.API.INFO",
        f"$KV.{catalog.TOOLS_BUCKET}.pay",
        "_INBOX.anything",
    ],
)
async def test_a_worker_publishes_nothing_but_its_announcements_progress_and_answers(
    served: dict[str, Conn], subject: str
) -> None:
    worker = served[PAYMENTS]
    await worker.nc.publish(subject, b"{}")
    await worker.nc.flush()
    assert await reported(worker, "publish", subject)


@pytest.mark.parametrize(
    ("user", "subject", "queue"),
    [
        (PAYMENTS, WorkerSubjects.calls("payments"), ""),  # outside its queue group: every call copied
        (PAYMENTS, WorkerSubjects.calls("refunds"), WorkerSubjects.queue("refunds")),
        (PAYMENTS, WorkerSubjects.ALIVE, ""),
        (PAYMENTS, "tg.>", ""),
        (PAYMENTS, "_INBOX.>", ""),
        (AGENT, WorkerSubjects.calls("payments"), WorkerSubjects.queue("payments")),
        (OPERATOR, WorkerSubjects.calls("payments"), WorkerSubjects.queue("payments")),
        ("executor", WorkerSubjects.calls("payments"), WorkerSubjects.queue("payments")),
    ],
)
async def test_nobody_else_takes_a_worker_s_calls(served: dict[str, Conn], user: str, subject: str, queue: str) -> None:
    conn = served[user]
    subscription = await conn.nc.subscribe(subject, queue=queue)
    await conn.nc.flush()
    assert await reported(conn, "subscription", subject)
    await subscription.unsubscribe()


@pytest.mark.parametrize("user", [AGENT, OPERATOR, REFUNDS])
async def test_only_the_executor_calls_a_worker(served: dict[str, Conn], user: str) -> None:
    conn, subject = served[user], WorkerSubjects.call("payments", "pay")
    assert not await allowed(conn, subject, conn.nc.request(subject, b"call", timeout=WAIT_S))
