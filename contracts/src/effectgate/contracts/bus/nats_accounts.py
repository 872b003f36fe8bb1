"""Which NATS account each user of effectgate lives in, and what crosses between accounts.

Pure: derived from :func:`~effectgate.contracts.bus.nats_permissions.nats_users` (no subject is
spelled here). The streams, the buckets and the services share :data:`CORE`; every other user has
an account of its own, holding its one user: the auditor (:data:`AUDITOR_ACCOUNT`), the chat-ops bot
(:data:`CHATOPS_ACCOUNT`), the MCP surface (:data:`SURFACE_ACCOUNT`), the operator
(:data:`OPERATOR_ACCOUNT`), each agent principal and each approver. A client account imports exactly
what its user's rules name: a service import per subject it publishes (its requests, its RPCs, KV
puts, the JetStream API of its consumers and buckets and their acks), a stream import per subject it
subscribes to (its receipts, alarms, tool states, KV changes). A subject its user uses only among its
own replicas (:attr:`Rule.local`: the surface's MCP cancels) stays in its account. :data:`CORE`
exports each imported subject to the accounts importing it only.

A tool worker is the other way round: its account ``WORKER_<name>`` (:func:`worker_account`)
imports nothing and exports to :data:`CORE` only the service of its calls and the streams of its
announcements and progress, which :data:`CORE` imports (the executor calls and hears them). So a
worker reaches no stream, bucket, request or RPC subject at all, and its answers, mapped back by
the server, reach only the executor's call that asked.

Why: nats-server does not check a reply subject against the publisher's rights, so a client
that may ask anything of the server (a JetStream API, a service's RPC) could have the answer
(consumer info, a pull's messages, an error) published onto a stream subject. Across accounts
a reply is mapped by the server (``_R_.…`` in :data:`CORE`) and lands back in the requester's
own account, where no stream is and only its own imports lead anywhere. A client account answers
``$JS.API.>`` itself (JetStream not enabled), so a client's API comes under another name
(:attr:`Rule.core_subject`, :data:`~effectgate.contracts.bus.catalog.ACCOUNT_JS_API`; :func:`js_api_of`).
So only the services hold JetStream API rights in :data:`CORE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_permissions import (
    AUDITOR,
    CHATOPS,
    JS_API,
    MCP_SURFACE,
    OPERATOR,
    NatsUser,
    Rule,
    agent_user,
    approver_user,
    nats_users,
    private_inbox,
    worker_user,
)
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.hosting import WorkerSubjects

__all__ = [
    "AUDITOR_ACCOUNT",
    "CHATOPS_ACCOUNT",
    "CORE",
    "OPERATOR_ACCOUNT",
    "OWN_ACCOUNTS",
    "SURFACE_ACCOUNT",
    "Export",
    "Import",
    "NatsAccount",
    "agent_account",
    "approver_account",
    "js_api_of",
    "nats_accounts",
    "worker_account",
]

CORE = "EFFECTGATE"
"""The account of the streams, the buckets and the services (and admin)."""

AUDITOR_ACCOUNT = "AUDITOR"
"""The auditor's account: no JetStream; its one consumer's API and acks imported from :data:`CORE`."""

CHATOPS_ACCOUNT = "CHATOPS"
"""The chat-ops bot's account: no JetStream; its consumers', lease's and cards bucket's API imported."""

SURFACE_ACCOUNT = "MCP_SURFACE"
"""The MCP surface's account: no JetStream; its calls bucket's API imported; its replicas' cancels stay in it."""

OPERATOR_ACCOUNT = "OPERATOR"
"""The operator's account: no JetStream; its RPCs and the policy bucket's reads imported."""

OWN_ACCOUNTS = {
    AUDITOR: AUDITOR_ACCOUNT,
    CHATOPS: CHATOPS_ACCOUNT,
    MCP_SURFACE: SURFACE_ACCOUNT,
    OPERATOR: OPERATOR_ACCOUNT,
}
"""The users with a fixed name and an account of their own (besides agents and approvers), by user."""

Kind = Literal["service", "stream"]
Response = Literal["singleton", "stream"]
"""How many answers a service import's request gets: one, or a stream of them (a pull's deliveries)."""


@dataclass(frozen=True)
class Import:
    """One subject an account takes from another: a client's from :data:`CORE`, or :data:`CORE`'s from a worker.

    Attributes:
        kind: ``service`` (the importer publishes requests to it) or ``stream`` (it receives messages on it).
        rule: the user's rule the import comes from (its subject and why).
        account: the exporting account.
    """

    kind: Kind
    rule: Rule
    account: str = CORE

    @property
    def subject(self) -> str:
        """The subject in :data:`CORE` (:attr:`Rule.core_subject`, else the rule's own)."""
        return self.rule.core_subject or self.rule.subject

    @property
    def to(self) -> str | None:
        """The name it is imported under in the client's account, when not :attr:`subject`."""
        return self.rule.subject if self.rule.core_subject else None

    @property
    def response(self) -> Response:
        """``stream`` for a service whose requests get several answers (:attr:`Rule.streamed`), else ``singleton``."""
        return "stream" if self.rule.streamed else "singleton"


@dataclass(frozen=True)
class Export:
    """One subject an account offers (:data:`CORE`, or a worker's), and the only accounts that may import it.

    Attributes:
        kind: ``service`` or ``stream``.
        subject: the exported subject (each client's own concrete subject).
        accounts: the importing accounts, sorted.
        response: a service's answers per request (nats-server ``response_type``); ``singleton`` for a stream.
    """

    kind: Kind
    subject: str
    accounts: tuple[str, ...]
    response: Response = "singleton"


@dataclass(frozen=True)
class NatsAccount:
    """One NATS account and what it holds.

    Attributes:
        name: the account name (:data:`CORE`, one of :data:`OWN_ACCOUNTS`, ``AGENT_<principal>``, ``APPROVER_<name>``,
            ``WORKER_<name>``).
        users: its users.
        jetstream: whether JetStream is enabled in it (only :data:`CORE`).
        imports: what it takes from other accounts (a client's: from :data:`CORE`; :data:`CORE`'s: from the workers).
        exports: what it offers other accounts.
        about: what it is, one line (rendered as a comment); empty: the renderer's own words.
    """

    name: str
    users: tuple[NatsUser, ...]
    jetstream: bool = False
    imports: tuple[Import, ...] = ()
    exports: tuple[Export, ...] = ()
    about: str = ""


def agent_account(principal: str) -> str:
    """The account of agent ``principal``: ``AGENT_<principal>``."""
    return f"AGENT_{principal}"


def approver_account(approver: str) -> str:
    """The account of approver ``approver``: ``APPROVER_<approver>``."""
    return f"APPROVER_{approver}"


def worker_account(worker: str) -> str:
    """The account of tool worker ``worker``: ``WORKER_<worker>``."""
    return f"WORKER_{worker}"


def js_api_of(user: str | None) -> str:
    """The JetStream API prefix ``user`` calls (nats-py ``nc.jetstream(prefix=...)``).

    :data:`~effectgate.contracts.bus.catalog.ACCOUNT_JS_API` for a user of :data:`OWN_ACCOUNTS` (its
    account imports the API under that name), else ``$JS.API``: the services, and no user at all (an
    open server has no accounts). Agents and approvers have no JetStream API either way.
    """
    return catalog.ACCOUNT_JS_API if user in OWN_ACCOUNTS else JS_API


def nats_accounts(directory: PrincipalDirectory, *, admin: bool = False) -> tuple[NatsAccount, ...]:
    """Every account for ``directory``: :data:`CORE` first, then :data:`OWN_ACCOUNTS`, approvers, agents, workers.

    Raises:
        DirectoryInvalid: as :func:`~effectgate.contracts.bus.nats_permissions.nats_users`.
    """
    users = {user.name: user for user in nats_users(directory, admin=admin)}
    clients = {account: users.pop(user) for user, account in OWN_ACCOUNTS.items()}
    clients |= {approver_account(n): users.pop(approver_user(n)) for n in sorted(directory.approvers)}
    clients |= {agent_account(p): users.pop(agent_user(p)) for p in sorted(directory.principals)}
    accounts = tuple(NatsAccount(name, (user,), imports=imports_of(user)) for name, user in clients.items())
    workers = tuple(_worker_account(name, users.pop(worker_user(name))) for name in sorted(directory.workers))
    served = tuple(one for worker in workers for one in _served(worker))
    core = NatsAccount(CORE, tuple(users.values()), jetstream=True, imports=served, exports=_exports(accounts))
    return (core, *accounts, *workers)


def _worker_account(name: str, user: NatsUser) -> NatsAccount:
    """A worker's account: its one user; its calls exported to :data:`CORE` as a service, the rest as streams."""
    exports = (
        Export("service", WorkerSubjects.calls(name), (CORE,)),
        Export("stream", WorkerSubjects.alive(name), (CORE,)),
        Export("stream", WorkerSubjects.progress(name, "*"), (CORE,)),
    )
    about = "a tool worker: exports its calls, announcements and progress, imports nothing"
    return NatsAccount(worker_account(name), (user,), exports=exports, about=about)


def _served(worker: NatsAccount) -> tuple[Import, ...]:
    """What :data:`CORE` imports of ``worker``'s exports: the executor calls and hears them there."""
    why = {"service": "the executor's calls", "stream": "announcements and progress, for the executor"}
    return tuple(Import(one.kind, Rule(one.subject, why[one.kind]), worker.name) for one in worker.exports)


def imports_of(user: NatsUser) -> tuple[Import, ...]:
    """A service import per subject ``user`` publishes, a stream import per subject it subscribes to.

    Its own inbox and its :attr:`Rule.local` subjects are its account's business. A JetStream API or
    ack subject crosses like any other (the client accounts have no JetStream): the auditor reaches
    its one consumer so, the bot its consumers and buckets.
    """
    own = f"{user.inbox_prefix or private_inbox(user.name)}."

    def crossing(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
        return tuple(rule for rule in rules if not rule.local and not rule.subject.startswith(own))

    return (
        *(Import("service", rule) for rule in crossing(user.publish)),
        *(Import("stream", rule) for rule in crossing(user.subscribe)),
    )


def _exports(accounts: tuple[NatsAccount, ...]) -> tuple[Export, ...]:
    """One export per imported subject, restricted to the accounts importing it (stable order)."""
    importers: dict[tuple[Kind, str, Response], list[str]] = {}
    for account in accounts:
        for one in account.imports:
            importers.setdefault((one.kind, one.subject, one.response), []).append(account.name)
    return tuple(
        Export(kind, subject, tuple(sorted(names)), response) for (kind, subject, response), names in importers.items()
    )
