"""The generated NATS accounts: an agent's, approver's or the auditor's reply subject never leaves its own account.

nats-server does not check a reply subject against the publisher's rights; what stops a client
from having a service's answer, a JetStream PubAck or consumer info, or a pull's messages published
onto a stream subject is that each agent and approver, and the auditor, has an account of its own
(:mod:`effectgate.contracts.bus.nats_accounts`).
A nats-server runs the config the generator writes for a small directory; ``admin`` (in the
services' account) watches the ``_R_.>`` replies go out, so "nothing arrived" is never just "too early".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import pytest
import pytest_asyncio
from nats.aio.msg import Msg

from effectgate.cli.stack.credentials import BusCredentials, write_private
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_accounts import (
    AUDITOR_ACCOUNT,
    CORE,
    OWN_ACCOUNTS,
    Import,
    NatsAccount,
    agent_account,
    approver_account,
    nats_accounts,
)
from effectgate.contracts.bus.nats_permissions import (
    ADMIN,
    AUDITOR,
    CHATOPS,
    SERVICES,
    Rule,
    agent_user,
    approver_user,
)
from effectgate.devstack.servers import nats_server
from effectgate.shared.config.nats_server import literal, render_config
from tests.deploy.test_nats_permissions import (
    DIRECTORY,
    WAIT_S,
    Conn,
    allowed,
    open_all,
    secured_server,
    stream_of,
)

pytestmark = [pytest.mark.connected, pytest.mark.timing]

AGENT, OTHER = agent_user("demo-agent"), agent_user("other-agent")
ALICE, BOB = approver_user("alice"), approver_user("bob")
USERS = (*SERVICES, ADMIN, AGENT, OTHER, ALICE, BOB, AUDITOR)
AUDITOR_CALLS = {  # the auditor's consumer API in its account, and what nats-server answers there
    "consumer info": f"{catalog.AUDITOR_JS_API}.CONSUMER.INFO.{catalog.STREAM}.{catalog.AUDITOR_CONSUMER.durable}",
    "pull": f"{catalog.AUDITOR_JS_API}.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.AUDITOR_CONSUMER.durable}",
}
AUDITOR_VICTIMS = ("other's request", "tools bucket", "other's receipt", "decision")
RESPONDERS = {  # stub answers from the services' account (admin stands in for the executor's records)
    "policy": (Rpc.TOOLS_LIST, Rpc.TOOLS_GET),
    "approvals": (Rpc.APPROVALS_WITHDRAW, Rpc.APPROVALS_STATUS, Rpc.APPROVALS_LIST),
    "registry": (Rpc.REGISTRY_LIST,),
    ADMIN: (Rpc.RECORDS_GET,),
}
VICTIMS = {  # a reply subject an attacker might aim a service's answer or a PubAck at
    "other's request": Subjects.request("other-agent"),
    "tools bucket": f"$KV.{catalog.TOOLS_BUCKET}.latest.x",
    "other's receipt": Subjects.receipt("other-agent", "x"),
    "decision": Subjects.decision("demo-agent", "x"),
    "claim": Subjects.claim("demo-agent", "x"),
    "approval": Subjects.approval("granted", "demo-agent", "x"),
    "other's withdrawal": Rpc.approvals_withdraw("other-agent"),
    "bob's answer": Rpc.approvals_decide("bob"),
}
SENDS = {  # caller: how it gets an answer sent to the reply subject it chose
    "agent rpc": (AGENT, Rpc.tools_list("demo-agent")),
    "agent records rpc": (AGENT, Rpc.records_get("demo-agent")),
    "agent puback": (AGENT, Subjects.request("demo-agent")),
    "approver rpc": (ALICE, Rpc.REGISTRY_LIST),
}


def test_every_client_has_an_account_of_its_own_without_jetstream() -> None:
    core, *clients = nats_accounts(DIRECTORY, admin=True)
    assert core.name == CORE and core.jetstream
    assert {user.name for user in core.users} == {*SERVICES, ADMIN} - {CHATOPS}
    names = {*map(agent_account, DIRECTORY.principals), *map(approver_account, DIRECTORY.approvers)}
    assert {account.name for account in clients} == {*OWN_ACCOUNTS.values(), *names}
    assert all(len(account.users) == 1 and not account.jetstream and not account.exports for account in clients)


def test_the_auditor_imports_its_one_consumers_api_and_acks_only() -> None:
    (auditor,) = (account for account in nats_accounts(DIRECTORY) if account.name == AUDITOR_ACCOUNT)
    durable = f"{catalog.STREAM}.{catalog.AUDITOR_CONSUMER.durable}"
    assert [(one.kind, one.subject, one.to, one.response) for one in auditor.imports] == [
        ("service", f"$JS.API.CONSUMER.INFO.{durable}", AUDITOR_CALLS["consumer info"], "singleton"),
        ("service", f"$JS.API.CONSUMER.MSG.NEXT.{durable}", AUDITOR_CALLS["pull"], "stream"),
        ("service", f"$JS.ACK.{durable}.>", None, "singleton"),
    ]


def test_an_agent_imports_only_its_own_concrete_subjects() -> None:
    for account in nats_accounts(DIRECTORY)[1:]:
        if account.name in OWN_ACCOUNTS.values():
            continue
        (user,) = account.users
        own = user.name.split("-", 1)[1]
        for one in account.imports:
            assert "$JS" not in one.rule.subject and "_INBOX" not in one.rule.subject
            assert ">" not in one.rule.subject
            if user.name.startswith("agent-"):
                assert own in one.rule.subject.split("."), (account.name, one.rule.subject)


def test_each_export_reaches_only_the_accounts_that_import_it() -> None:
    core, *clients = nats_accounts(DIRECTORY)
    for export in core.exports:
        importers = {a.name for a in clients if any(i.subject == export.subject for i in a.imports)}
        assert set(export.accounts) == importers, export.subject


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, BusCredentials]]:
    """``(url, credentials)`` of a nats-server running the generated config, with ``admin``."""
    with secured_server(tmp_path_factory.mktemp("nats-accounts"), admin=True) as running:
        yield running


@pytest_asyncio.fixture(scope="module")
async def conns(server: tuple[str, BusCredentials]) -> AsyncIterator[dict[str, Conn]]:
    opened = await open_all(*server, USERS, RESPONDERS)
    yield opened
    for conn in opened.values():
        await conn.nc.close()


async def stored(conns: dict[str, Conn], subject: str) -> int:
    """Messages kept on ``subject`` (0 where no stream holds it: core NATS subjects)."""
    if not subject.startswith(("tg.req.", "tg.receipt.", "tg.decision.", "tg.claim.", "tg.approval.", "$KV.")):
        return 0
    info = await conns[ADMIN].js.stream_info(stream_of(subject), subjects_filter=subject)
    return (info.state.subjects or {}).get(subject, 0)


@pytest.mark.parametrize("call", [Rpc.tools_list("demo-agent"), Rpc.approvals_status("demo-agent")])
async def test_an_agent_asks_its_rpcs_with_its_private_inbox(conns: dict[str, Conn], call: str) -> None:
    """The service answers the server's ``_R_.…`` mapping; the answer reaches ``_INBOX_agent-<p>.…``."""
    answer = await conns[AGENT].nc.request(call, b"{}", timeout=WAIT_S)
    assert answer.subject.startswith(f"_INBOX_{AGENT}.") and answer.data == b"{}"


async def test_an_agent_asks_for_its_records_through_its_import(conns: dict[str, Conn]) -> None:
    answer = await conns[AGENT].nc.request(Rpc.records_get("demo-agent"), b"{}", timeout=WAIT_S)
    assert answer.data == b"{}"


async def test_an_agent_request_is_acknowledged_by_the_stream_in_the_services_account(conns: dict[str, Conn]) -> None:
    ack = await conns[AGENT].js.publish(Subjects.request("demo-agent"), b"{}")
    assert ack.stream == catalog.STREAM


async def test_an_approver_receives_alarms_through_its_import(conns: dict[str, Conn], ns: str) -> None:
    watching = await conns[ALICE].nc.subscribe(Subjects.ALARMS)
    await conns[ALICE].nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=WAIT_S)  # the subscription is in effect
    await conns["audit"].nc.publish(Subjects.alarm(ns), b"alarm")
    assert (await watching.next_msg(timeout=WAIT_S)).subject == Subjects.alarm(ns)
    await watching.unsubscribe()


@pytest.mark.parametrize("send", list(SENDS))
@pytest.mark.parametrize("victim", list(VICTIMS))
async def test_an_answer_aimed_at_another_subject_stays_in_the_callers_account(
    conns: dict[str, Conn], send: str, victim: str
) -> None:
    """Stored nowhere, seen by no other agent and by no service: the reply lands in the caller's own account."""
    caller, subject = SENDS[send]
    target = VICTIMS[victim]
    others = [await conns[OTHER].nc.subscribe(Subjects.receipts_of("other-agent"))]
    await conns[OTHER].nc.request(Rpc.tools_list("other-agent"), b"{}", timeout=WAIT_S)  # its subscription in effect
    services = [await conns["approvals"].nc.subscribe(target)] if target.startswith("tg.approvals.") else []
    with contextlib.suppress(nats.errors.NoRespondersError):  # any answer: the subscription is in effect
        await conns["approvals"].nc.request(Rpc.EXECUTOR_CONTENTS, b"{}", timeout=WAIT_S)
    answers = await conns[ADMIN].nc.subscribe("_R_.>")
    await conns[ADMIN].nc.request(Rpc.tools_list("demo-agent"), b"{}", timeout=WAIT_S)  # answered to _INBOX.
    before = await stored(conns, target)
    await conns[caller].nc.publish(subject, b"{}", reply=target)
    assert (await answers.next_msg(timeout=WAIT_S)).subject.startswith("_R_.")  # the answer went out
    await asyncio.sleep(0.3)
    assert await stored(conns, target) == before
    for subscription in (*others, *services):
        with pytest.raises(nats.errors.TimeoutError):
            await subscription.next_msg(timeout=0.1)
    for subscription in (answers, *others, *services):
        await subscription.unsubscribe()


@pytest.mark.nats_2_10
@pytest.mark.parametrize("call", list(AUDITOR_CALLS))
@pytest.mark.parametrize("victim", AUDITOR_VICTIMS)
async def test_the_auditors_server_answer_aimed_at_another_subject_stays_in_its_account(
    conns: dict[str, Conn], call: str, victim: str, ns: str
) -> None:
    """Consumer info, or a pull's answer, aimed at a stream subject: stored nowhere, seen by no other agent.

    A record waits for the pull; ``admin`` watches the answer go out (to ``_R_.…``, or, were the auditor
    in the services' account, to the subject itself). It lands in the auditor's own account, where the
    subject leads nowhere (nobody listens there: the pull's answer is a 408, the record stays pending).
    """
    target = VICTIMS[victim]
    await conns["executor"].js.publish(Subjects.receipt("demo-agent", ns), b"{}")
    others = await conns[OTHER].nc.subscribe(Subjects.receipts_of("other-agent"))
    await conns[OTHER].nc.request(Rpc.tools_list("other-agent"), b"{}", timeout=WAIT_S)  # its subscription in effect
    seen: asyncio.Queue[Msg] = asyncio.Queue()
    watching = [await conns[ADMIN].nc.subscribe(subject, cb=seen.put) for subject in ("_R_.>", target)]
    await conns[ADMIN].nc.request(Rpc.tools_list("demo-agent"), b"{}", timeout=WAIT_S)  # answered to _INBOX.
    before = await stored(conns, target)
    await conns[AUDITOR].nc.publish(AUDITOR_CALLS[call], b'{"batch": 1, "expires": 1000000000}', reply=target)
    answer = await asyncio.wait_for(seen.get(), WAIT_S)
    await asyncio.sleep(0.3)
    assert await stored(conns, target) == before
    assert answer.subject.startswith("_R_.") and (answer.data or answer.headers)  # consumer info, a status
    with pytest.raises(nats.errors.TimeoutError):
        await others.next_msg(timeout=0.1)
    for subscription in (*watching, others):
        await subscription.unsubscribe()
    if answer.reply:  # the pull's record, held out: acked (admin saw its ack subject) for the next pull
        await conns[ADMIN].nc.request(answer.reply, b"+ACK", timeout=WAIT_S)


async def test_the_auditor_has_no_jetstream_api_of_its_own(conns: dict[str, Conn]) -> None:
    """Its account has no JetStream; the streams' API reaches it only as its consumer's imports."""
    conn = conns[AUDITOR]
    api = f"$JS.API.CONSUMER.INFO.{catalog.STREAM}.{catalog.AUDITOR_CONSUMER.durable}"
    assert not await allowed(conn, api, conn.nc.request(api, b"", timeout=WAIT_S))


@pytest.mark.parametrize("api", ["$JS.API.INFO", f"$JS.API.STREAM.INFO.{catalog.STREAM}"])
async def test_an_agent_has_no_jetstream_api(conns: dict[str, Conn], api: str) -> None:
    conn = conns[AGENT]
    assert not await allowed(conn, api, conn.nc.request(api, b"", timeout=WAIT_S))


async def test_even_with_api_rights_an_agents_account_has_no_jetstream(tmp_path: Path) -> None:
    """Defence in depth: a mistaken ``$JS.API.>`` rule would reach no stream; the server says so."""
    core, *clients = nats_accounts(DIRECTORY)
    loose = tuple(_with_api(account) if account.name == agent_account("demo-agent") else account for account in clients)
    passwords = {user.name: f"P{user.name}-0123456789abcdef" for a in (core, *loose) for user in a.users}
    config = write_private(tmp_path / "nats.conf", render_config((core, *loose), literal(passwords)))
    with nats_server(tmp_path, config=config) as process:
        nc = await nats.connect(process.url, user=AGENT, password=passwords[AGENT], inbox_prefix=f"_INBOX_{AGENT}")
        answer = await nc.request("$JS.API.INFO", b"", timeout=WAIT_S)
        await nc.close()
    assert b"10039" in answer.data  # JetStream not enabled for account


def _with_api(account: NatsAccount) -> NatsAccount:
    """``account`` whose one user may also publish every JetStream API subject."""
    (user,) = account.users
    loose = dataclasses.replace(user, publish=(*user.publish, Rule("$JS.API.>")))
    return dataclasses.replace(account, users=(loose,))


@pytest.mark.parametrize(
    ("account", "stolen"),
    [
        (agent_account("other-agent"), Import("stream", Rule(Subjects.receipts_of("demo-agent")))),
        (agent_account("other-agent"), Import("service", Rule(Subjects.request("demo-agent")))),
        (approver_account("alice"), Import("service", Rule(Rpc.approvals_decide("bob")))),
        (agent_account("other-agent"), Import("service", Rule(f"$KV.{catalog.CARDS_BUCKET}.>"))),  # the bot's
        (approver_account("alice"), Import("service", Rule(f"$JS.API.DIRECT.GET.KV_{catalog.POLICY_BUCKET}.>"))),
        (
            agent_account("demo-agent"),
            Import("service", Rule(f"$JS.API.CONSUMER.MSG.NEXT.{catalog.STREAM}.{catalog.CHATOPS_RECEIPTS.durable}")),
        ),
    ],
)
def test_an_account_cannot_import_what_was_exported_to_another(tmp_path: Path, account: str, stolen: Import) -> None:
    """A config that adds such an import does not start: the export names its one importer."""
    accounts = tuple(
        dataclasses.replace(a, imports=(*a.imports, stolen)) if a.name == account else a
        for a in nats_accounts(DIRECTORY)
    )
    passwords = {user.name: f"P{user.name}-0123456789abcdef" for a in accounts for user in a.users}
    config = write_private(tmp_path / "nats.conf", render_config(accounts, literal(passwords)))
    with pytest.raises(RuntimeError, match="server exited"), nats_server(tmp_path, config=config):
        pass
