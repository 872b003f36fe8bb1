"""Who may publish and subscribe what on the bus: every NATS user of effectgate and its rights.

Pure: derived from :mod:`effectgate.contracts.bus.catalog` (no subject is spelled here) and a
:class:`~effectgate.contracts.directory.PrincipalDirectory`. :mod:`effectgate.shared.config.nats_server`
renders the result as nats-server configuration text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.contracts.tools.hosting import WorkerSubjects

__all__ = [
    "ACCOUNT_REPLIES",
    "ADMIN",
    "AUDITOR",
    "CHATOPS",
    "JS_API",
    "MCP_SURFACE",
    "OPERATOR",
    "SERVICES",
    "NatsUser",
    "Rule",
    "agent_user",
    "approver_user",
    "nats_users",
    "private_inbox",
    "worker_user",
]

CHATOPS = "chatops"
"""The chat-ops bot's user: answers approvals only as approvers mapped to a chat user."""

MCP_SURFACE = "mcp-surface"
"""The MCP surface's own user: its calls ledger and the changes that alter tool listings.

It sends no request of its own: it acts for each principal as that principal's ``agent-<p>`` user."""

CALLS_STREAM = f"KV_{catalog.MCP_CALLS_BUCKET}"
"""The stream behind the MCP calls ledger."""

SERVICES = ("registry", "policy", "approvals", "executor", "audit", CHATOPS)
"""The service users; each is also the service's name."""

CARDS_STREAM = f"KV_{catalog.CARDS_BUCKET}"
"""The stream behind the chat-ops cards bucket."""

ADMIN = "admin"
"""The user with every right, generated only on request."""

OPERATOR = "operator"
"""The operator's user: registry, approvals list and audit requests; never an approval answer."""

AUDITOR = "auditor"
"""The read-only auditor's user: its own export of decisions, approval outcomes and receipts; nothing else."""

ACCOUNT_REPLIES = "_R_.>"
"""Replies into another account: nats-server maps a reply crossing a service import to ``_R_.<token>``."""

SERVICE_INBOXES = "_INBOX.>"
"""Replies to the services, which keep nats-py's default inbox prefix."""

LEASES_STREAM = f"KV_{catalog.LEASES_BUCKET}"
"""The stream behind the leases bucket: work done once per deployment."""

KV_STREAM = f"KV_{catalog.TOOLS_BUCKET}"
"""The stream behind the tools bucket (NATS KV naming)."""

POLICY_STREAM = f"KV_{catalog.POLICY_BUCKET}"
"""The stream behind the policy bucket."""


@dataclass(frozen=True)
class Rule:
    """One subject a user may (or may not) use, and why.

    Attributes:
        subject: a NATS subject, wildcards allowed.
        why: a one-line reason, rendered as a comment; empty for none.
        streamed: a request on it is answered with several messages (a pull's deliveries), not one.
        core_subject: the subject it stands for in the services' account when its own account imports
            it under another name (``subject``); empty: the same subject.
        local: used only among the user's own connections (its replicas), inside its own account:
            never imported from the services' account.
    """

    subject: str
    why: str = ""
    streamed: bool = False
    core_subject: str = ""
    local: bool = False


@dataclass(frozen=True)
class NatsUser:
    """One NATS user and its permissions.

    Attributes:
        name: the user name (``registry``, ``agent-<p>``, ``approver-<n>``, ``admin``).
        title: what the user is, one line.
        publish: subjects it may publish to.
        subscribe: subjects it may subscribe to.
        deny_publish: subjects refused even where ``publish`` allows them.
        inbox_prefix: its private reply prefix; ``None`` for nats-py's default ``_INBOX``.
        notes: comment lines explaining the user.
    """

    name: str
    title: str
    publish: tuple[Rule, ...]
    subscribe: tuple[Rule, ...]
    deny_publish: tuple[Rule, ...] = ()
    inbox_prefix: str | None = None
    notes: tuple[str, ...] = ()


def agent_user(principal: str) -> str:
    """The NATS user of the agent ``principal``: ``agent-<principal>``."""
    return f"agent-{principal}"


def approver_user(approver: str) -> str:
    """The NATS user of the approver ``approver``: ``approver-<approver>``."""
    return f"approver-{approver}"


def worker_user(worker: str) -> str:
    """The NATS user of the tool worker ``worker`` (every instance of it): ``worker-<worker>``."""
    return f"worker-{worker}"


def private_inbox(user: str) -> str:
    """The inbox prefix of a non-service client: ``_INBOX_<user>`` (nats-py ``inbox_prefix``)."""
    return f"_INBOX_{user}"


JS_API = "$JS.API"
"""JetStream's API prefix in the account of the streams."""


def _api(*tokens: str) -> str:
    return ".".join((JS_API, *tokens))


def _consumer(spec: catalog.ConsumerSpec, prefix: str = JS_API) -> tuple[Rule, ...]:
    """Bind (nats-py pull_subscribe), pull, and ack/nak/term one durable consumer of the stream.

    ``prefix``: the JetStream API prefix its user calls the API by (another account's import name).
    """
    info, pull = (f"CONSUMER.{call}.{catalog.STREAM}.{spec.durable}" for call in ("INFO", "MSG.NEXT"))
    return (
        _api_as(prefix, info, f"bind {spec.durable}"),
        dataclasses.replace(_api_as(prefix, pull, "pull"), streamed=True),
        Rule(f"$JS.ACK.{catalog.STREAM}.{spec.durable}.>", "ack, nak with delay, term"),
    )


def _api_as(prefix: str, call: str, why: str) -> Rule:
    """The API subject ``<prefix>.<call>``, standing for ``$JS.API.<call>`` when ``prefix`` is another."""
    return Rule(f"{prefix}.{call}", why, core_subject="" if prefix == JS_API else _api(call))


def _kv_reads(
    stream: str = KV_STREAM, bucket: str = "tools", what: str = "descriptors", prefix: str = JS_API
) -> tuple[Rule, ...]:
    """Bind a bucket (default: the tools bucket) and read its entries (direct get once the bucket allows it).

    ``prefix``: the JetStream API prefix its user calls the API by (:func:`_consumer`).
    """
    return (
        _api_as(prefix, f"STREAM.INFO.{stream}", f"bind the {bucket} bucket"),
        _api_as(prefix, f"STREAM.MSG.GET.{stream}", f"read {what}"),
        _api_as(prefix, f"DIRECT.GET.{stream}", "... by direct get"),
        _api_as(prefix, f"DIRECT.GET.{stream}.>", ""),
    )


def _lease(key: str, prefix: str = JS_API) -> tuple[Rule, ...]:
    """Take and renew one lease of the leases bucket (:mod:`effectgate.shared.runtime.leadership`).

    ``prefix``: the JetStream API prefix its user calls the API by (:func:`_consumer`).
    """
    return (
        _api_as(prefix, f"STREAM.INFO.{LEASES_STREAM}", "bind the leases bucket"),
        _api_as(prefix, f"STREAM.MSG.GET.{LEASES_STREAM}", "read a lease on a refused create (no direct get)"),
        Rule(f"$KV.{catalog.LEASES_BUCKET}.{key}", f"take and renew the {key} lease (revision-checked)"),
    )


def _reports(service: str) -> Rule:
    """A service reports security events as itself only (the audit trusts the subject's token)."""
    return Rule(Subjects.security_of(service), "its own security events")


def _replies_to(clients: Iterable[str]) -> tuple[Rule, ...]:
    """Answers to the services' default inboxes, and across accounts when ``clients`` (not services) call.

    Every client that is not a service (the operator, the chat-ops bot, agents, approvers) has an
    account of its own (:mod:`effectgate.contracts.bus.nats_accounts`): its requests arrive with a
    reply the server mapped to :data:`ACCOUNT_REPLIES`. No private inbox is answered directly.
    """
    remote = (Rule(ACCOUNT_REPLIES, "replies to the clients' own accounts (operator, bot, agents, approvers)"),)
    return (Rule(SERVICE_INBOXES, "replies to services and default-prefix callers"), *(remote * bool(tuple(clients))))


def _check(directory: PrincipalDirectory) -> None:
    """Every name becomes a subject token and part of a user name.

    Raises:
        DirectoryInvalid: a name is not one subject token (:data:`catalog.TOKEN`).
    """
    for table, names in (("principals", directory.principals), ("approvers", directory.approvers)):
        for name in names:
            if not catalog.TOKEN.match(name):
                raise DirectoryInvalid(f"[{table}.{name}]: the name must match {catalog.TOKEN.pattern}")
    for name in directory.workers:
        if not SERVER_NAME.match(name):
            raise DirectoryInvalid(f"[workers.{name}]: a worker name must match {SERVER_NAME.pattern}")


def nats_users(directory: PrincipalDirectory, *, admin: bool = False) -> tuple[NatsUser, ...]:
    """Every NATS user of effectgate for ``directory``, services first.

    Args:
        directory: the agents (``principals``) and people (``approvers``).
        admin: also generate :data:`ADMIN`, which may publish and subscribe everything.

    Returns:
        The users in a stable order: services, the operator, the auditor, approvers, agents,
        tool workers (each sorted), then admin.

    Raises:
        DirectoryInvalid: a principal or approver name is not one subject token.
    """
    _check(directory)
    agents = tuple(agent_user(p) for p in sorted(directory.principals))
    approvers = tuple(approver_user(n) for n in sorted(directory.approvers))
    users = (
        _registry((OPERATOR, *approvers, *agents)),
        _policy((OPERATOR, *approvers, *agents)),
        _approvals((OPERATOR, CHATOPS, *approvers, *agents)),
        _executor((OPERATOR, *agents)),
        _audit((OPERATOR, *approvers)),
        _chatops(_chat_mapped(directory)),
        _surface(),
        _operator(),
        _auditor(),
        *(_approver(name) for name in sorted(directory.approvers)),
        *(_agent(principal) for principal in sorted(directory.principals)),
        *(_worker(name) for name in sorted(directory.workers)),
    )
    return (*users, _admin()) if admin else users


def _registry(clients: tuple[str, ...]) -> NatsUser:
    return NatsUser(
        name="registry",
        title="registry: owns the bus layout and the tools bucket",
        publish=(
            Rule(_api(">"), "provisions both streams, the consumers, the KV bucket"),
            Rule(Subjects.tool_published("*"), "ToolPublished events (only the registry)"),
            Rule(f"$KV.{catalog.TOOLS_BUCKET}.>", "KV create/put of descriptors (only the registry)"),
            Rule(f"$JS.FC.{KV_STREAM}.>", "flow control of the ordered consumer behind kv.keys()"),
            _reports("registry"),
            *_replies_to(clients),
        ),
        deny_publish=(
            Rule(_api("CONSUMER.MSG.NEXT", ">")),
            Rule(_api("STREAM.DELETE", ">")),
            Rule(_api("STREAM.PURGE", ">")),
            Rule(_api("STREAM.MSG.DELETE", ">")),
        ),
        subscribe=(
            *(Rule(subject) for subject in (Rpc.REGISTRY_PUBLISH, Rpc.REGISTRY_GET, Rpc.REGISTRY_LIST)),
            Rule(Subjects.TOOL_STATES, "the executor's tool states, recorded in the tools bucket"),
            Rule(SERVICE_INBOXES, "JetStream API answers, PubAcks, KV watch"),
        ),
        notes=(
            "Owning the layout is not owning the traffic: no pulling from the services'",
            "consumers, and no erasing events the audit trail is built from. Stream updates",
            "stay allowed for provisioning changes, so a stolen registry password could",
            "still shorten max_age: guard it like an operator credential.",
        ),
    )


def _policy(clients: tuple[str, ...]) -> NatsUser:
    return NatsUser(
        name="policy",
        title="policy: tool requests in, signed decisions out; per-caller tool listings; the policy in force",
        publish=(
            Rule(Subjects.DECISIONS, "only policy decides"),
            Rule(Subjects.NEEDS_APPROVAL, "copies of the decisions that need approval, for the approvals service"),
            *_consumer(catalog.POLICY_CONSUMER),
            *_consumer(catalog.POLICY_RECEIPTS),
            *_consumer(catalog.POLICY_RESOLUTIONS),
            Rule(_api("STREAM.INFO", catalog.STREAM), "how full the record is: new requests are denied near its limit"),
            Rule(_api("STREAM.MSG.GET", catalog.STREAM), "rebuilds its spend ledger: decisions, grants, receipts"),
            Rule(_api("DIRECT.GET", catalog.STREAM, ">"), "... by direct get (no more than the line above)"),
            *_kv_reads(),
            Rule(Subjects.policy_kv(">"), "puts policies in force (only the policy service writes the bucket)"),
            *_kv_reads(POLICY_STREAM, "policy", "the policy in force and published versions"),
            Rule(Subjects.POLICY_PUBLISHED, "PolicyPublished events (only the policy service)"),
            *_replies_to(clients),
            _reports("policy"),
        ),
        subscribe=(
            Rule(Rpc.POLICY_RECHECK, "re-check at the moment of effect (executor, approvals)"),
            Rule(Rpc.TOOLS_LIST, "each agent's listing: what it may call (the principal is the last token)"),
            Rule(Rpc.TOOLS_GET),
            Rule(Rpc.POLICY_READY, "readiness: is a valid policy loaded"),
            Rule(Rpc.POLICY_PUBLISH, "a new policy from the operator, validated before it is put in force"),
            Rule(Subjects.POLICY_CURRENT, "every replica follows the policy in force"),
            Rule(f"$KV.{catalog.TOOLS_BUCKET}.latest.*", "each tool's latest version as it is raised (kept in memory)"),
            Rule(Rpc.POLICY_BUDGETS, "spend budgets' counters (operators only)"),
            Rule(Rpc.POLICY_BUDGETS_RESOLVE, "resolving an uncertain call's reservation (operators only)"),
            Rule(SERVICE_INBOXES),
        ),
    )


def _approvals(clients: tuple[str, ...]) -> NatsUser:
    return NatsUser(
        name="approvals",
        title="approvals: decisions in, approval requests and signed outcomes out",
        publish=(
            Rule(Subjects.APPROVALS, "only approvals grants"),
            *_consumer(catalog.APPROVALS_CONSUMER),
            *_lease(catalog.Leases.APPROVALS_EXPIRY),
            Rule(
                _api("CONSUMER.INFO", catalog.STREAM, catalog.POLICY_CONSUMER.durable),
                "which requests wait for a decision (an answer before its approval opened)",
            ),
            Rule(_api("STREAM.MSG.GET", catalog.STREAM), "rebuilds its index from the stream, reads receipts"),
            Rule(_api("DIRECT.GET", catalog.STREAM, ">"), "... by direct get (no more than the line above)"),
            Rule(Rpc.POLICY_RECHECK, "re-checks a grant with the policy"),
            Rule(Rpc.EXECUTOR_CONTENTS, "asks the executor what a call's file references name"),
            _reports("approvals"),
            *_replies_to(clients),
        ),
        subscribe=(
            Rule(Rpc.APPROVALS_LIST),
            Rule(Rpc.APPROVALS_SHOW),
            Rule(Rpc.APPROVALS_DECIDE, "the approver is the last token"),
            Rule(Rpc.APPROVALS_WITHDRAW, "an agent withdraws its own call (the principal is the last token)"),
            Rule(Rpc.APPROVALS_STATUS, "an agent asks which approval its call waits on (the last token)"),
            Rule(SERVICE_INBOXES),
        ),
    )


def _executor(clients: tuple[str, ...]) -> NatsUser:
    return NatsUser(
        name="executor",
        title="executor: decisions and approvals in; claims, results and receipts out",
        publish=(
            Rule(Subjects.RECEIPTS, "only the executor issues receipts"),
            Rule(Subjects.RESOLUTIONS, "only the executor resolves uncertain calls (reconciler, operator's resolve)"),
            Rule(Subjects.CLAIMS, "durable claims of writes"),
            Rule(Subjects.TOOL_STATES, "ToolStateChanged: MCP servers' and Python tools' states (only the executor)"),
            Rule(WorkerSubjects.calls("*"), "signed calls of Python tools to their workers (only the executor)"),
            Rule(Subjects.PROGRESS, "a streaming call's progress, relayed to its agent (only the executor)"),
            *(Rule(subject, f"result chunks ({catalog.RESULTS_STREAM})") for subject in catalog.RESULTS_SUBJECTS),
            *_consumer(catalog.EXECUTOR_DECISIONS),
            *_consumer(catalog.EXECUTOR_APPROVALS),
            *_consumer(catalog.BACKSTOP_CONSUMER),
            *_consumer(catalog.RECONCILER_CONSUMER),
            *_lease(catalog.Leases.RECONCILER),
            Rule(_api("STREAM.MSG.GET", catalog.STREAM), "decisions, receipts, claims, approvals by subject"),
            Rule(_api("DIRECT.GET", catalog.STREAM, ">"), "... by direct get"),
            Rule(_api("DIRECT.GET", catalog.RESULTS_STREAM, ">"), "result chunks, read back for their agent"),
            *_kv_reads(),
            Rule(Rpc.POLICY_RECHECK, "re-checks a grant with the policy before the effect"),
            _reports("executor"),
            *_replies_to(clients),
        ),
        subscribe=(
            Rule(Rpc.EXECUTOR_CONTENTS, "what a call's file references name (only the executor sees the files)"),
            Rule(Rpc.RECORDS_GET, "each agent's own stored records, read back for it (the last token)"),
            Rule(Rpc.UNCERTAIN_LIST, "the uncertain calls and their resolutions (operators only)"),
            Rule(Rpc.UNCERTAIN_RESOLVE, "an operator-signed resolution of an uncertain call (operators only)"),
            Rule(WorkerSubjects.ALIVE, "tool workers' announcements: Python tools' states"),
            Rule(WorkerSubjects.progress("*", "*"), "streaming calls' progress from their workers"),
            Rule(SERVICE_INBOXES, "JetStream API answers, PubAcks, recheck answers, workers' answers"),
        ),
    )


def _audit(clients: tuple[str, ...]) -> NatsUser:
    return NatsUser(
        name="audit",
        title="audit: every stream event in; trail, verify and alarms answered",
        publish=(
            *_consumer(catalog.AUDIT_CONSUMER),
            *_lease(catalog.Leases.AUDIT_WRITER),
            Rule(_api("STREAM.INFO", catalog.STREAM), "verify: how far the stream is ahead"),
            Rule(_api("STREAM.MSG.GET", catalog.STREAM), "verify: each record against its stream message"),
            _reports("audit"),
            Rule(Subjects.ALARMS, "an alarm for each recorded security event (only the audit)"),
            *_replies_to(clients),
        ),
        subscribe=(
            *(Rule(subject) for subject in (Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY, Rpc.AUDIT_EXPORT, Rpc.AUDIT_ALARMS)),
            Rule(Rpc.AUDIT_REQUESTS),
            Rule(SERVICE_INBOXES),
        ),
    )


def _chat_mapped(directory: PrincipalDirectory) -> tuple[str, ...]:
    """Approvers with a Matrix or Slack user id: the only ones the bot may answer as."""
    ids = {name: directory.chat_ids(name) for name in directory.approvers}
    return tuple(sorted(name for name, chat in ids.items() if chat.matrix or chat.slack))


def _chatops(answering: tuple[str, ...]) -> NatsUser:
    inbox = private_inbox(CHATOPS)
    return NatsUser(
        name=CHATOPS,
        title="chat-ops bot: approval events and receipts in, cards out; answers as mapped approvers only",
        publish=(
            *(Rule(Rpc.approvals_decide(name), f"{name} has a chat id in the directory") for name in answering),
            Rule(Rpc.APPROVALS_LIST, "re-sync: pending approvals without a card"),
            Rule(Rpc.APPROVALS_SHOW, "... one whole, when a page left its arguments out"),
            *_consumer(catalog.CHATOPS_APPROVALS, catalog.ACCOUNT_JS_API),
            *_consumer(catalog.CHATOPS_RECEIPTS, catalog.ACCOUNT_JS_API),
            *_lease(catalog.Leases.CHATOPS_RESYNC, catalog.ACCOUNT_JS_API),
            _api_as(catalog.ACCOUNT_JS_API, f"STREAM.INFO.{CARDS_STREAM}", "bind the cards bucket"),
            _api_as(catalog.ACCOUNT_JS_API, f"STREAM.MSG.GET.{CARDS_STREAM}", "read cards (no direct get)"),
            Rule(f"$KV.{catalog.CARDS_BUCKET}.>", "put cards (only the bot)"),
            _reports(CHATOPS),
        ),
        subscribe=(Rule(f"{inbox}.>", "its own replies only"),),
        inbox_prefix=inbox,
        notes=(
            "The bot faces the internet (Slack's requests, a homeserver): it holds no private key",
            "and may answer only as the approvers the directory maps to a chat user. It reads",
            "approval events and receipts (results included): run it where approvers' data may be.",
            "It reads nothing back from the stream and has no direct get. Its account has no JetStream:",
            f'nc.jetstream(prefix="{catalog.ACCOUNT_JS_API}") reaches the API it imports under that name.',
        ),
    )


def _surface() -> NatsUser:
    inbox = private_inbox(MCP_SURFACE)
    return NatsUser(
        name=MCP_SURFACE,
        title="MCP surface: its calls ledger; hears tool and policy changes (calls go out as each agent's own user)",
        publish=(
            *_kv_reads(CALLS_STREAM, "MCP calls", "call entries", catalog.ACCOUNT_JS_API),
            Rule(f"$KV.{catalog.MCP_CALLS_BUCKET}.>", "create and update call entries (only the surface)"),
            Rule(Subjects.MCP_CANCELS, "a client's cancellation, to the replica that holds the call", local=True),
        ),
        subscribe=(
            Rule(f"{inbox}.>", "its own replies only"),
            Rule(f"$KV.{catalog.TOOLS_BUCKET}.>", "tools published or changing state: listings to refresh"),
            Rule(Subjects.POLICY_CURRENT, "a new policy in force: listings to refresh"),
            Rule(Subjects.MCP_CANCELS, "cancellations other replicas heard (in its own account)", local=True),
        ),
        inbox_prefix=inbox,
        notes=(
            "It holds the agents' credentials files of the principals it serves: run it where they may be.",
            "The descriptors it hears are the registry's; which tools a principal sees is still",
            "asked of the policy service as that principal. Its account has no JetStream:",
            f'nc.jetstream(prefix="{catalog.ACCOUNT_JS_API}") reaches the calls bucket it imports under that name.',
        ),
    )


def _operator() -> NatsUser:
    inbox = private_inbox(OPERATOR)
    return NatsUser(
        name=OPERATOR,
        title="operator: the registry, the policy, pending approvals, the audit and its alarms; answers no approval",
        publish=(
            *(Rule(subject) for subject in (Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET, Rpc.POLICY_READY)),
            Rule(Rpc.REGISTRY_PUBLISH, "publishing tools is the operator's (no agent has it)"),
            Rule(Rpc.POLICY_PUBLISH, "publishing a policy is the operator's; the policy service validates it"),
            *_kv_reads(POLICY_STREAM, "policy", "published policies (explain, simulate)", catalog.ACCOUNT_JS_API),
            *(Rule(subject) for subject in (Rpc.APPROVALS_LIST, Rpc.APPROVALS_SHOW, Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY)),
            Rule(Rpc.AUDIT_EXPORT),
            Rule(Rpc.AUDIT_ALARMS, "recent security events"),
            Rule(Rpc.AUDIT_REQUESTS, "recent requests and their outcomes"),
            Rule(Rpc.POLICY_BUDGETS, "spend budgets' counters (the reconciliation check)"),
            Rule(Rpc.POLICY_BUDGETS_RESOLVE, "resolves an uncertain call's reservation (the operator's only)"),
            Rule(Rpc.UNCERTAIN_LIST, "the uncertain calls and what became of each"),
            Rule(Rpc.UNCERTAIN_RESOLVE, "resolves an uncertain call ran / not_run (signed by the operator key too)"),
        ),
        subscribe=(
            Rule(f"{inbox}.>"),
            Rule(Subjects.ALARMS, "watches alarms as they are raised"),
            Rule(Subjects.TOOL_STATES, "watches MCP tool states as they change (effectgate up prints them)"),
        ),
        inbox_prefix=inbox,
        notes=(
            f'Connect with inbox_prefix=b"{inbox}"; nc.jetstream(prefix="{catalog.ACCOUNT_JS_API}"): its account',
            "has no JetStream and imports the policy bucket's API under that name.",
        ),
    )


def _auditor() -> NatsUser:
    inbox = private_inbox(AUDITOR)
    return NatsUser(
        name=AUDITOR,
        title="auditor: reads decisions, approval outcomes and receipts through its own consumer; publishes nothing",
        publish=_consumer(catalog.AUDITOR_CONSUMER, catalog.AUDITOR_JS_API),
        subscribe=(Rule(f"{inbox}.>", "its own pulls' deliveries only"),),
        inbox_prefix=inbox,
        notes=(
            f'Connect with inbox_prefix=b"{inbox}"; nc.jetstream(prefix="{catalog.AUDITOR_JS_API}"): its account',
            "has no JetStream and imports its one consumer's API under that name, and its acks.",
            f"Its consumer ({catalog.AUDITOR_CONSUMER.durable}) filters on several subjects",
            "(nats-server 2.10+; not created on an older server).",
            "No request, decision, approval or RPC subject, no KV, no stream reads by subject:",
            "what it may read is what the consumer delivers (decisions carry the resolved call).",
        ),
    )


def _approver(name: str) -> NatsUser:
    user = approver_user(name)
    return NatsUser(
        name=user,
        title=f"approver {name}: answers approvals as {name} only, reads the trail and alarms",
        publish=(
            Rule(Rpc.approvals_decide(name), "nobody answers as someone else"),
            *(Rule(subject) for subject in (Rpc.APPROVALS_LIST, Rpc.APPROVALS_SHOW, Rpc.AUDIT_TRAIL, Rpc.AUDIT_VERIFY)),
            Rule(Rpc.AUDIT_EXPORT),
            Rule(Rpc.AUDIT_ALARMS, "recent security events"),
            Rule(Rpc.AUDIT_REQUESTS, "recent requests and their outcomes"),
            *(Rule(subject) for subject in (Rpc.REGISTRY_LIST, Rpc.REGISTRY_GET, Rpc.POLICY_READY)),
        ),
        subscribe=(Rule(f"{private_inbox(user)}.>"), Rule(Subjects.ALARMS, "watches alarms as they are raised")),
        inbox_prefix=private_inbox(user),
        notes=(f'Connect with inbox_prefix=b"{private_inbox(user)}".',),
    )


def _agent(principal: str) -> NatsUser:
    user = agent_user(principal)
    return NatsUser(
        name=user,
        title=f"agent {principal}: its own requests, decisions, receipts, results, approvals and withdrawals",
        publish=(
            Rule(Subjects.request(principal), "its own tool requests only (PubAck to its inbox)"),
            Rule(Rpc.tools_list(principal), "the tools it may call (not the registry's full listing)"),
            Rule(Rpc.tools_get(principal)),
            Rule(Rpc.approvals_withdraw(principal), "withdraws its own pending calls only"),
            Rule(Rpc.approvals_status(principal), "which approval its own calls wait on"),
            Rule(Rpc.records_get(principal), "its own stored receipts, decisions and results (no JetStream API)"),
        ),
        subscribe=(
            Rule(Subjects.receipts_of(principal)),
            Rule(Subjects.progress_of(principal), "how far its own streaming calls are (from the executor)"),
            Rule(f"{private_inbox(user)}.>"),
        ),
        inbox_prefix=private_inbox(user),
        notes=(f'Connect with inbox_prefix=b"{private_inbox(user)}": PubAcks and answers arrive there.',),
    )


def _worker(name: str) -> NatsUser:
    user = worker_user(name)
    return NatsUser(
        name=user,
        title=f"tool worker {name}: the executor's calls of python:{name} tools in; answers, progress, alive out",
        publish=(
            Rule(WorkerSubjects.alive(name), "announces what it serves"),
            Rule(WorkerSubjects.progress(name, "*"), "how far a streaming call is"),
            Rule(ACCOUNT_REPLIES, "answers to the executor's calls (mapped into its own account)"),
        ),
        subscribe=(
            Rule(f"{WorkerSubjects.calls(name)} {WorkerSubjects.queue(name)}", "its calls, in its queue group only"),
            Rule(f"{private_inbox(user)}.>", "its own replies only"),
        ),
        inbox_prefix=private_inbox(user),
        notes=(
            "Its account exports its calls to the services' account and imports nothing: no stream,",
            "no KV, no JetStream API, no request or RPC subject reaches it. Every instance connects",
            f'as this user (the queue group shares the calls), with inbox_prefix=b"{private_inbox(user)}".',
        ),
    )


def _admin() -> NatsUser:
    return NatsUser(
        name=ADMIN,
        title="admin: every right (a test observer; never in production)",
        publish=(Rule(">"),),
        subscribe=(Rule(">"),),
    )
