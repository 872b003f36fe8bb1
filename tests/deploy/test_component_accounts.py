"""The chat-ops bot, the MCP surface and the operator in accounts of their own: what each needs works, nothing else.

Each lives outside the services' account (:mod:`effectgate.contracts.bus.nats_accounts`), with no
JetStream: the API subjects it needs come imported under ``JS.EFFECTGATE.API``
(:data:`~effectgate.contracts.bus.catalog.ACCOUNT_JS_API`), its KV puts and RPCs as service imports,
what it hears as stream imports. So a JetStream API request, a KV put or an RPC whose reply it aims
at a stream subject is answered back into its own account, where no stream is: stored nowhere.
``admin`` (in the services' account) watches the ``_R_.>`` answers go out, so "nothing stored" is
never just "too early".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator

import nats
import pytest
import pytest_asyncio
from nats.aio.msg import Msg

from effectgate.cli.stack.credentials import BusCredentials
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Leases, Rpc, Subjects
from effectgate.contracts.bus.nats_accounts import OWN_ACCOUNTS, nats_accounts
from effectgate.contracts.bus.nats_permissions import ADMIN, CHATOPS, MCP_SURFACE, OPERATOR, SERVICES, agent_user
from tests.deploy.test_nats_accounts import stored
from tests.deploy.test_nats_permissions import DIRECTORY, WAIT_S, Conn, allowed, connect, open_all, secured_server

pytestmark = [pytest.mark.connected, pytest.mark.timing]

API = catalog.ACCOUNT_JS_API
COMPONENTS = (CHATOPS, MCP_SURFACE, OPERATOR)
OTHER = agent_user("other-agent")
USERS = (*SERVICES, ADMIN, OTHER, MCP_SURFACE, OPERATOR)  # the bot is one of the services
BOT_APPROVALS, BOT_RECEIPTS = catalog.CHATOPS_APPROVALS.durable, catalog.CHATOPS_RECEIPTS.durable
KV = {bucket: f"KV_{bucket}" for bucket in catalog.BUCKETS}
IMPORTED_API = {  # each component's whole JetStream API, as the services' account names it
    CHATOPS: {
        *(
            f"$JS.API.CONSUMER.{call}.{catalog.STREAM}.{d}"
            for call in ("INFO", "MSG.NEXT")
            for d in (BOT_APPROVALS, BOT_RECEIPTS)
        ),
        *(
            f"$JS.API.STREAM.{call}.{KV[b]}"
            for call in ("INFO", "MSG.GET")
            for b in (catalog.LEASES_BUCKET, catalog.CARDS_BUCKET)
        ),
    },
    MCP_SURFACE: {
        *(f"$JS.API.{call}.{KV[catalog.MCP_CALLS_BUCKET]}" for call in ("STREAM.INFO", "STREAM.MSG.GET", "DIRECT.GET")),
        f"$JS.API.DIRECT.GET.{KV[catalog.MCP_CALLS_BUCKET]}.>",
    },
    OPERATOR: {
        *(f"$JS.API.{call}.{KV[catalog.POLICY_BUCKET]}" for call in ("STREAM.INFO", "STREAM.MSG.GET", "DIRECT.GET")),
        f"$JS.API.DIRECT.GET.{KV[catalog.POLICY_BUCKET]}.>",
    },
}
RESPONDERS = {  # stub answers from the services' account
    "approvals": (Rpc.APPROVALS_LIST, Rpc.APPROVALS_SHOW, Rpc.approvals_decide("alice")),
    "registry": (Rpc.REGISTRY_LIST,),
    "policy": (Rpc.POLICY_READY,),
    "audit": (Rpc.AUDIT_TRAIL,),
}
VICTIMS: dict[str, Callable[[str], str]] = {  # a stream subject an attacker might aim a server's answer at
    "other's request": lambda _: Subjects.request("other-agent"),
    "tools bucket": lambda ns: f"$KV.{catalog.TOOLS_BUCKET}.latest.{ns}",
    "policy bucket": lambda ns: Subjects.policy_kv(f"v.{ns}"),
    "other's receipt": lambda ns: Subjects.receipt("other-agent", ns),
    "decision": lambda ns: Subjects.decision("demo-agent", ns),
    "claim": lambda ns: Subjects.claim("demo-agent", ns),
    "approval": lambda ns: Subjects.approval("granted", "demo-agent", ns),
}
SENDS = {  # what each may send and have answered: (user, subject, body); the buckets allow no direct get
    "bot consumer info": (CHATOPS, f"{API}.CONSUMER.INFO.{catalog.STREAM}.{BOT_APPROVALS}", b""),
    "bot cards info": (CHATOPS, f"{API}.STREAM.INFO.{KV[catalog.CARDS_BUCKET]}", b""),
    "bot lease read": (CHATOPS, f"{API}.STREAM.MSG.GET.{KV[catalog.LEASES_BUCKET]}", b'{"seq": 1}'),
    "bot card put": (CHATOPS, f"$KV.{catalog.CARDS_BUCKET}.attack", b"{}"),
    "bot rpc": (CHATOPS, Rpc.APPROVALS_LIST, b"{}"),
    "bot pull": (CHATOPS, f"{API}.CONSUMER.MSG.NEXT.{catalog.STREAM}.{BOT_RECEIPTS}", b'{"batch": 1, "no_wait": true}'),
    "surface calls get": (MCP_SURFACE, f"{API}.STREAM.MSG.GET.{KV[catalog.MCP_CALLS_BUCKET]}", b'{"seq": 1}'),
    "surface call put": (MCP_SURFACE, f"$KV.{catalog.MCP_CALLS_BUCKET}.demo-agent.attack", b"{}"),
    "operator policy get": (
        OPERATOR,
        f"{API}.STREAM.MSG.GET.{KV[catalog.POLICY_BUCKET]}",
        b'{"last_by_subj": "%s"}' % Subjects.POLICY_CURRENT.encode(),
    ),
    "operator policy info": (OPERATOR, f"{API}.STREAM.INFO.{KV[catalog.POLICY_BUCKET]}", b""),
    "operator rpc": (OPERATOR, Rpc.REGISTRY_LIST, b"{}"),
}


def _account(user: str) -> tuple[str, ...]:
    (account,) = (a for a in nats_accounts(DIRECTORY) if a.name == OWN_ACCOUNTS[user])
    assert [u.name for u in account.users] == [user] and not account.jetstream and not account.exports
    return tuple(one.subject for one in account.imports if one.subject.startswith("$JS.API."))


def test_only_the_services_hold_jetstream_api_rights_in_the_services_account() -> None:
    core, *clients = nats_accounts(DIRECTORY)
    holders = {user.name for user in core.users if any(r.subject.startswith("$JS.") for r in user.publish)}
    assert holders == {user.name for user in core.users} == set(SERVICES) - {CHATOPS}
    for account in clients:
        (user,) = account.users
        assert not any(rule.subject.startswith("$JS.API.") for rule in user.publish), account.name


@pytest.mark.parametrize("user", COMPONENTS)
def test_each_component_imports_exactly_its_own_jetstream_api(user: str) -> None:
    """Renamed under ``JS.EFFECTGATE.API``: its consumers, lease and buckets; no stream read, no other bucket."""
    assert set(_account(user)) == IMPORTED_API[user]
    (account,) = (a for a in nats_accounts(DIRECTORY) if a.name == OWN_ACCOUNTS[user])
    renamed = [one for one in account.imports if one.subject.startswith("$JS.API.")]
    assert all(one.to == one.subject.replace("$JS.API", API, 1) for one in renamed)


def test_the_surfaces_cancels_stay_in_its_account() -> None:
    (account,) = (a for a in nats_accounts(DIRECTORY) if a.name == OWN_ACCOUNTS[MCP_SURFACE])
    assert Subjects.MCP_CANCELS not in {one.subject for one in account.imports}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BusCredentials]]:
    with secured_server(tmp_path_factory.mktemp("component-accounts"), admin=True) as running:
        yield running


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, BusCredentials]) -> AsyncIterator[dict[str, Conn]]:
    url, credentials = server
    opened = await open_all(url, credentials, USERS, RESPONDERS)
    opened["surface-2"] = await connect(url, credentials.options(MCP_SURFACE))  # a second replica
    yield opened
    for conn in opened.values():
        await conn.nc.close()


@pytest.mark.parametrize(
    ("spec", "feeder", "subject"),
    [
        (catalog.CHATOPS_APPROVALS, "approvals", lambda ns: Subjects.approval("requested", "demo-agent", ns)),
        (catalog.CHATOPS_RECEIPTS, "executor", lambda ns: Subjects.receipt("demo-agent", ns)),
    ],
    ids=["approvals", "receipts"],
)
async def test_the_bot_binds_pulls_and_acks_its_consumers(
    conns: dict[str, Conn], spec: catalog.ConsumerSpec, feeder: str, subject: Callable[[str], str], ns: str
) -> None:
    await conns[feeder].js.publish(subject(ns), b"{}")
    pull = await conns[CHATOPS].js.pull_subscribe_bind(spec.durable, catalog.STREAM)
    seen = []
    with contextlib.suppress(nats.errors.TimeoutError):
        while subject(ns) not in seen:
            for msg in await pull.fetch(10, timeout=WAIT_S):
                seen.append(msg.subject)
                await msg.ack_sync()
    await pull.unsubscribe()
    assert subject(ns) in seen


async def test_the_bot_takes_its_lease_and_keeps_its_cards(conns: dict[str, Conn], ns: str) -> None:
    lease = await conns[CHATOPS].js.key_value(catalog.LEASES_BUCKET)
    await lease.put(Leases.CHATOPS_RESYNC, ns.encode())
    assert (await lease.get(Leases.CHATOPS_RESYNC)).value == ns.encode()
    cards = await conns[CHATOPS].js.key_value(catalog.CARDS_BUCKET)
    revision = await cards.create(f"a{ns}", b"card")
    await cards.update(f"a{ns}", b"card, edited", last=revision)
    assert (await cards.get(f"a{ns}")).value == b"card, edited"


@pytest.mark.parametrize(
    ("user", "call"),
    [
        *((CHATOPS, call) for call in RESPONDERS["approvals"]),
        *((OPERATOR, call) for call in (Rpc.REGISTRY_LIST, Rpc.POLICY_READY, Rpc.APPROVALS_LIST, Rpc.AUDIT_TRAIL)),
    ],
)
async def test_the_bot_and_the_operator_ask_their_rpcs(conns: dict[str, Conn], user: str, call: str) -> None:
    answer = await conns[user].nc.request(call, b"{}", timeout=WAIT_S)
    assert answer.subject.startswith(f"_INBOX_{user}.") and answer.data == b"{}"


async def test_the_bot_reports_security_events_as_itself(conns: dict[str, Conn], ns: str) -> None:
    ack = await conns[CHATOPS].js.publish(Subjects.security(CHATOPS, f"k{ns}"), b"{}")
    assert ack.stream == catalog.STREAM


async def test_the_surface_keeps_its_calls_ledger(conns: dict[str, Conn], ns: str) -> None:
    ledger = await conns[MCP_SURFACE].js.key_value(catalog.MCP_CALLS_BUCKET)
    revision = await ledger.create(f"demo-agent.{ns}", b"call")
    await ledger.update(f"demo-agent.{ns}", b"call, answered", last=revision)
    replica = await conns["surface-2"].js.key_value(catalog.MCP_CALLS_BUCKET)
    assert (await replica.get(f"demo-agent.{ns}")).value == b"call, answered"


async def test_the_surface_hears_tools_and_the_policy_in_force(conns: dict[str, Conn], ns: str) -> None:
    heard: asyncio.Queue[Msg] = asyncio.Queue()
    for subject in (f"$KV.{catalog.TOOLS_BUCKET}.>", Subjects.POLICY_CURRENT):
        await conns[MCP_SURFACE].nc.subscribe(subject, cb=heard.put)
    await conns[MCP_SURFACE].js.stream_info(KV[catalog.MCP_CALLS_BUCKET])  # the subscriptions are in effect
    await (await conns["registry"].js.key_value(catalog.TOOLS_BUCKET)).put(f"latest.t{ns}", b"1.0.0")
    await (await conns["policy"].js.key_value(catalog.POLICY_BUCKET)).put("current", ns.encode())
    subjects = {(await asyncio.wait_for(heard.get(), WAIT_S)).subject for _ in range(2)}
    assert subjects == {f"$KV.{catalog.TOOLS_BUCKET}.latest.t{ns}", Subjects.POLICY_CURRENT}


async def test_the_surfaces_replicas_hear_each_others_cancels_and_nobody_else_does(
    conns: dict[str, Conn], ns: str
) -> None:
    replica = await conns[MCP_SURFACE].nc.subscribe(Subjects.MCP_CANCELS)
    core = await conns[ADMIN].nc.subscribe(Subjects.MCP_CANCELS)
    for conn in (conns[MCP_SURFACE], conns[ADMIN]):
        await conn.nc.flush()
    await conns["surface-2"].nc.publish(Subjects.mcp_cancel("demo-agent"), ns.encode())
    assert (await replica.next_msg(timeout=WAIT_S)).data == ns.encode()
    with pytest.raises(nats.errors.TimeoutError):
        await core.next_msg(timeout=0.3)
    for subscription in (replica, core):
        await subscription.unsubscribe()


async def test_the_operator_reads_the_policy_bucket(conns: dict[str, Conn], ns: str) -> None:
    await (await conns["policy"].js.key_value(catalog.POLICY_BUCKET)).put(f"v.{ns}", b"policy text")
    bucket = await conns[OPERATOR].js.key_value(catalog.POLICY_BUCKET)
    assert (await bucket.get(f"v.{ns}")).value == b"policy text"


async def test_the_operator_hears_alarms_and_tool_states(conns: dict[str, Conn], ns: str) -> None:
    heard: asyncio.Queue[Msg] = asyncio.Queue()
    for subject in (Subjects.ALARMS, Subjects.TOOL_STATES):
        await conns[OPERATOR].nc.subscribe(subject, cb=heard.put)
    await conns[OPERATOR].nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=WAIT_S)  # the subscriptions are in effect
    await conns["audit"].nc.publish(Subjects.alarm(f"k{ns}"), b"alarm")
    await conns["executor"].nc.publish(Subjects.tool_state(f"t{ns}"), b"state")
    subjects = {(await asyncio.wait_for(heard.get(), WAIT_S)).subject for _ in range(2)}
    assert subjects == {Subjects.alarm(f"k{ns}"), Subjects.tool_state(f"t{ns}")}


OUT_OF_REACH = (  # JetStream API calls under the account's prefix, unless they are its own
    f"STREAM.MSG.GET.{catalog.STREAM}",
    f"STREAM.INFO.{catalog.STREAM}",
    f"DIRECT.GET.{catalog.STREAM}.{Subjects.receipt('demo-agent', 'r1')}",
    f"CONSUMER.INFO.{catalog.STREAM}.{catalog.POLICY_CONSUMER.durable}",
    f"CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.AUDIT_CONSUMER.durable}",
    f"CONSUMER.CREATE.{catalog.STREAM}",
    *(f"STREAM.INFO.{stream}" for stream in KV.values()),
    *(f"STREAM.MSG.GET.{stream}" for stream in KV.values()),
)


@pytest.mark.parametrize(
    ("user", "call"),
    [(user, call) for user in COMPONENTS for call in OUT_OF_REACH if f"$JS.API.{call}" not in IMPORTED_API[user]],
)
async def test_each_component_reaches_no_other_jetstream_api(conns: dict[str, Conn], user: str, call: str) -> None:
    conn, subject = conns[user], f"{API}.{call}"
    assert not await allowed(conn, subject, conn.nc.request(subject, b"{}", timeout=WAIT_S))


@pytest.mark.parametrize("send", list(SENDS))
@pytest.mark.parametrize("victim", list(VICTIMS))
async def test_an_answer_a_component_aims_at_a_stream_subject_stays_in_its_account(
    conns: dict[str, Conn], send: str, victim: str, ns: str
) -> None:
    """The server's (or a service's) answer goes out to ``_R_.…`` and lands in the sender's account: stored nowhere."""
    user, subject, body = SENDS[send]
    target = VICTIMS[victim](ns)
    others = await conns[OTHER].nc.subscribe(Subjects.receipts_of("other-agent"))
    await conns[OTHER].nc.flush()
    answers = await conns[ADMIN].nc.subscribe("_R_.>")
    await conns[ADMIN].nc.flush()
    before = await stored(conns, target)
    await conns[user].nc.publish(subject, body, reply=target)
    answer = await answers.next_msg(timeout=WAIT_S)
    await asyncio.sleep(0.3)
    assert await stored(conns, target) == before
    assert answer.subject.startswith("_R_.")
    with pytest.raises(nats.errors.TimeoutError):
        await others.next_msg(timeout=0.1)
    for subscription in (answers, others):
        await subscription.unsubscribe()
    if answer.reply:  # a pull's message, held out: acked for the next pull
        await conns[ADMIN].nc.publish(answer.reply, b"+ACK")
