"""The one catalog of bus names: subjects, streams, durable consumers, KV buckets.

No other module spells a subject. Event subjects carry the principal in a fixed
position so one NATS permission rule per principal works (``tg.req.<principal>``),
and the request id last where a subject must be unique per request (receipts are
published with ``Nats-Expected-Last-Subject-Sequence: 0``: one receipt per request).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

__all__ = [
    "APPROVALS_CONSUMER",
    "AUDITED_SUBJECTS",
    "AUDITOR_CONSUMER",
    "ACCOUNT_JS_API",
    "AUDITOR_JS_API",
    "AUDIT_CONSUMER",
    "BACKSTOP_CONSUMER",
    "CARDS_BUCKET",
    "MCP_CALLS_BUCKET",
    "MCP_CALLS_MAX_AGE_S",
    "CHATOPS_APPROVALS",
    "CHATOPS_RECEIPTS",
    "CONSUMERS",
    "POLICY_BUCKET",
    "EXECUTOR_APPROVALS",
    "EXECUTOR_DECISIONS",
    "FAIR_ACK_PENDING",
    "POLICY_CONSUMER",
    "POLICY_RECEIPTS",
    "POLICY_RESOLUTIONS",
    "RECONCILER_CONSUMER",
    "RESULTS_STREAM",
    "RESULTS_SUBJECTS",
    "STREAM",
    "STREAM_SUBJECTS",
    "TOKEN",
    "TOOLS_BUCKET",
    "APPROVAL_KINDS",
    "AboutRequest",
    "ConsumerSpec",
    "RequestSubject",
    "StoredRecord",
    "LEASES_BUCKET",
    "BUCKETS",
    "LEASE_TTL_S",
    "Leases",
    "Rpc",
    "Subjects",
    "matches",
    "names_its_request",
    "names_request",
    "principal_of_event",
    "principal_of_request",
    "request_id_of",
    "request_subject_of",
    "security_of",
    "stored_record_of",
    "token_of",
]

TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
"""What a principal, approver or request id may be: one safe subject token."""

STREAM: Final = "EFFECTGATE"
"""The record: every event of every request (audited)."""

RESULTS_STREAM: Final = "EFFECTGATE_RESULTS"
"""Results too large for one message, in compressed chunks; the receipt holds their digest."""

TOOLS_BUCKET: Final = "EFFECTGATE_TOOLS"

POLICY_BUCKET: Final = "EFFECTGATE_POLICY"
"""The policy in force (``current``), every published text (``v.<hex>``) and the seeded file's digest (``file``)."""

CARDS_BUCKET: Final = "EFFECTGATE_CHAT_CARDS"
"""The chat-ops bot's record of each approval card (room and message ids), keyed by approval id."""

MCP_CALLS_BUCKET: Final = "EFFECTGATE_MCP_CALLS"
"""The MCP surface's ledger of calls (``<principal>.<call digest>``): which request a client's re-send belongs to."""

MCP_CALLS_MAX_AGE_S: Final = 86_400.0
"""How long the ledger keeps a call (seconds): longer than any approval waits."""

LEASES_BUCKET: Final = "EFFECTGATE_LEASES"
"""Work that runs once per deployment, however many replicas run: one key per lease (:class:`Leases`)."""

LEASE_TTL_S: Final = 6.0
"""How long a lease outlives its holder's last renewal, seconds (the bucket's TTL): a standby takes
over a dead holder's lease within this plus one renewal period (``LEASE_TTL_S / 3``)."""

BUCKETS: Final = (TOOLS_BUCKET, POLICY_BUCKET, CARDS_BUCKET, MCP_CALLS_BUCKET, LEASES_BUCKET)
"""Every KV bucket effectgate owns (provisioning creates each at the deployment's replica count)."""


class Leases:
    """The keys of :data:`LEASES_BUCKET`: each names work done by one replica of the deployment at a time."""

    AUDIT_WRITER: Final = "audit-writer"
    """The one audit replica that consumes the stream into the chain (its fencing token goes with its appends)."""
    APPROVALS_EXPIRY: Final = "approvals-expiry"
    """The one approvals replica that sweeps due approvals to expired."""
    CHATOPS_RESYNC: Final = "chatops-resync"
    """The one chat-ops replica that posts the cards pending approvals lack."""
    RECONCILER: Final = "executor-reconciler"
    """The one executor replica that reconciles ``uncertain`` calls (calls their reconcile operations)."""


STREAM_SUBJECTS: Final = (
    "tg.req.*",
    "tg.decision.*.*",
    "tg.needs_approval.*.*",
    "tg.approval.*.*.*",
    "tg.receipt.*.*",
    "tg.resolution.*.*",
    "tg.claim.*.*",
    "tg.tool.published.*",
    "tg.tool.state.*",
    "tg.security.*.*",
    "tg.policy.published",
)

RESULTS_SUBJECTS: Final = ("tg.result.*.*.*",)


class Subjects:
    """Builders for every event subject; arguments must match :data:`TOKEN`."""

    REQUESTS: Final = "tg.req.*"
    DECISIONS: Final = "tg.decision.*.*"
    NEEDS_APPROVAL: Final = "tg.needs_approval.*.*"
    """A copy of each signed ``needs_approval`` decision: all the approvals service consumes."""
    APPROVALS: Final = "tg.approval.*.*.*"
    APPROVALS_REQUESTED: Final = "tg.approval.requested.*.*"
    RECEIPTS: Final = "tg.receipt.*.*"
    RESOLUTIONS: Final = "tg.resolution.*.*"
    """:class:`UncertainResolved`: what became of an ``uncertain`` call (only the executor publishes)."""
    CLAIMS: Final = "tg.claim.*.*"
    APPROVALS_GRANTED: Final = "tg.approval.granted.*.*"
    APPROVALS_REJECTED: Final = "tg.approval.rejected.*.*"
    APPROVALS_VOTED: Final = "tg.approval.voted.*.*"
    SECURITY: Final = "tg.security.*.*"
    TOOL_STATES: Final = "tg.tool.state.*"
    """:class:`ToolStateChanged`: an MCP server's tools changed state (only the executor publishes)."""
    POLICY_PUBLISHED: Final = "tg.policy.published"
    """:class:`PolicyPublished`: a new policy version was put in force (signed by the policy key)."""
    POLICY_CURRENT: Final = f"$KV.{POLICY_BUCKET}.current"
    """The policy in force (key ``current`` of :data:`POLICY_BUCKET`): every policy replica subscribes to it."""
    ALARMS: Final = "tg.alarm.*"
    """Core NATS (not in the stream): the audit's alarm for each recorded security event."""
    PROGRESS: Final = "tg.progress.*.*"
    """Core NATS (not in the stream): how far a running streaming call is (``contracts.tools.hosting.CallProgress``)."""
    MCP_CANCELS: Final = "tg.mcp.cancel.*"
    """Core NATS (not in the stream): an MCP client's cancellation, relayed to every surface replica."""

    @staticmethod
    def mcp_cancel(principal: str) -> str:
        """``tg.mcp.cancel.<principal>``: a cancellation of one of ``principal``'s MCP calls."""
        return f"tg.mcp.cancel.{principal}"

    @staticmethod
    def request(principal: str) -> str:
        """``tg.req.<principal>``: where an agent publishes :class:`ToolRequested`."""
        return f"tg.req.{principal}"

    @staticmethod
    def principal_of_request(subject: str) -> str | None:
        """The principal of ``tg.req.<principal>``, or ``None`` when ``subject`` is not a request subject."""
        return principal_of_request(subject)

    @staticmethod
    def needs_approval_of(subject: str) -> tuple[str, str] | None:
        """``(principal, request_id)`` of ``tg.needs_approval.<principal>.<request_id>``, else ``None``."""
        named = request_subject_of(subject)
        return (named.principal, named.request_id) if named is not None and named.kind == "needs_approval" else None

    @staticmethod
    def decision(principal: str, request_id: str) -> str:
        """``tg.decision.<principal>.<request_id>``: :class:`DecisionMade`."""
        return f"tg.decision.{principal}.{request_id}"

    @staticmethod
    def needs_approval(principal: str, request_id: str) -> str:
        """``tg.needs_approval.<principal>.<request_id>``: the request's first decision, when it needs approval."""
        return f"tg.needs_approval.{principal}.{request_id}"

    @staticmethod
    def decisions_of(principal: str) -> str:
        """``tg.decision.<principal>.*``: every decision about one principal's requests."""
        return f"tg.decision.{principal}.*"

    @staticmethod
    def approval(kind: str, principal: str, request_id: str) -> str:
        """``tg.approval.<requested|voted|granted|rejected>.<principal>.<request_id>``."""
        return f"tg.approval.{kind}.{principal}.{request_id}"

    @staticmethod
    def receipt(principal: str, request_id: str) -> str:
        """``tg.receipt.<principal>.<request_id>``: the one :class:`ReceiptIssued`."""
        return f"tg.receipt.{principal}.{request_id}"

    @staticmethod
    def receipts_of(principal: str) -> str:
        """``tg.receipt.<principal>.*``: every receipt of one principal."""
        return f"tg.receipt.{principal}.*"

    @staticmethod
    def resolution(principal: str, request_id: str) -> str:
        """``tg.resolution.<principal>.<request_id>``: :class:`UncertainResolved`."""
        return f"tg.resolution.{principal}.{request_id}"

    @staticmethod
    def resolutions_of(principal: str) -> str:
        """``tg.resolution.<principal>.*``: the resolutions of ``principal``'s calls."""
        return f"tg.resolution.{principal}.*"

    @staticmethod
    def progress(principal: str, request_id: str) -> str:
        """``tg.progress.<principal>.<request_id>``: core NATS, from the executor (:data:`PROGRESS`)."""
        return f"tg.progress.{principal}.{request_id}"

    @staticmethod
    def progress_of(principal: str) -> str:
        """``tg.progress.<principal>.*``: how far each of one principal's streaming calls is."""
        return f"tg.progress.{principal}.*"

    @staticmethod
    def claim(principal: str, key_digest: str) -> str:
        """``tg.claim.<principal>.<key digest>``: the first :class:`EffectClaimed` of one idempotency key."""
        return f"tg.claim.{principal}.{key_digest}"

    @staticmethod
    def result_chunk(principal: str, request_id: str, index: int) -> str:
        """``tg.result.<principal>.<request_id>.<index>``: one chunk of a stored result.

        The executor passes a run id (``<request id>_<nonce>``) as ``request_id``: each run's chunks are its own.
        """
        return f"{Subjects.result_prefix(principal, request_id)}.{index}"

    @staticmethod
    def result_prefix(principal: str, run_id: str) -> str:
        """``tg.result.<principal>.<run_id>``: the subjects of one run's result chunks, less their index."""
        return f"tg.result.{principal}.{run_id}"

    @staticmethod
    def results_of(principal: str) -> str:
        """``tg.result.<principal>.>``: every stored result chunk of one principal."""
        return f"tg.result.{principal}.>"

    @staticmethod
    def security(service: str, kind: str) -> str:
        """``tg.security.<service>.<kind>``: a :class:`SecurityEvent` the service observed."""
        return f"tg.security.{service}.{kind}"

    @staticmethod
    def security_of(service: str) -> str:
        """``tg.security.<service>.*``: every security event one service may report."""
        return f"tg.security.{service}.*"

    @staticmethod
    def alarm(kind: str) -> str:
        """``tg.alarm.<kind>``: the audit's alarm for a recorded security event (core NATS)."""
        return f"tg.alarm.{kind}"

    @staticmethod
    def policy_kv(key: str) -> str:
        """``$KV.EFFECTGATE_POLICY.<key>``: where a key of :data:`POLICY_BUCKET` is written (NATS ADR-8).

        Core NATS subscribers of ``policy_kv("current")`` see every publication as it is stored.
        """
        return f"$KV.{POLICY_BUCKET}.{key}"

    @staticmethod
    def tool_published(tool: str) -> str:
        """``tg.tool.published.<tool>``: :class:`ToolPublished`."""
        return f"tg.tool.published.{tool}"

    @staticmethod
    def tool_state(tool: str) -> str:
        """``tg.tool.state.<tool>``: :class:`ToolStateChanged`."""
        return f"tg.tool.state.{tool}"


class Rpc:
    """Request/reply subjects (core NATS, not in the stream)."""

    REGISTRY_PUBLISH: Final = "tg.registry.publish"
    REGISTRY_GET: Final = "tg.registry.get"
    REGISTRY_LIST: Final = "tg.registry.list"
    POLICY_RECHECK: Final = "tg.policy.recheck"
    EXECUTOR_CONTENTS: Final = "tg.executor.contents"
    """The approvals service → the executor: what a call's file references name now (signed answer)."""
    POLICY_READY: Final = "tg.policy.ready"
    POLICY_PUBLISH: Final = "tg.policy.publish"
    """Operators only: put a new policy text in force (``{"text": …}``), validated by the policy service."""
    POLICY_BUDGETS: Final = "tg.policy.budgets"
    """Operators: the spend budgets' counters with their records (the reconciliation check)."""
    POLICY_BUDGETS_RESOLVE: Final = "tg.policy.budgets.resolve"
    """Operators: commit or release the reservation of an ``uncertain`` call."""
    TOOLS_LIST: Final = "tg.tools.list.*"
    TOOLS_GET: Final = "tg.tools.get.*"
    APPROVALS_LIST: Final = "tg.approvals.list"
    """Operators, approvers, chat-ops: pending approvals, in pages (:mod:`effectgate.contracts.bus.paging`)."""
    APPROVALS_SHOW: Final = "tg.approvals.show"
    """Operators, approvers, chat-ops: one approval with its arguments in full."""
    APPROVALS_DECIDE: Final = "tg.approvals.decide.*"
    APPROVALS_WITHDRAW: Final = "tg.approvals.withdraw.*"
    """Agents: withdraw one's own pending call (the principal is the last token)."""
    APPROVALS_STATUS: Final = "tg.approvals.status.*"
    """Agents: which approval one's own request waits on, and where it stands (the principal is the last token)."""
    AUDIT_TRAIL: Final = "tg.audit.trail"
    AUDIT_VERIFY: Final = "tg.audit.verify"
    AUDIT_EXPORT: Final = "tg.audit.export"
    AUDIT_ALARMS: Final = "tg.audit.alarms"
    AUDIT_REQUESTS: Final = "tg.audit.requests"
    """Operators and approvers: recent requests and how each ended, by principal and time (bounded)."""
    UNCERTAIN_LIST: Final = "tg.executor.uncertain.list"
    """Operators → the executor: the ``uncertain`` calls and what became of each (in pages)."""
    UNCERTAIN_RESOLVE: Final = "tg.executor.uncertain.resolve"
    """Operators → the executor: resolve one ``uncertain`` call ``ran`` / ``not_run`` (signed by the operator key)."""
    RECORDS_GET: Final = "tg.records.get.*"
    """Agents → the executor: one of one's own stored records (receipt, decision, result chunk; the last token)."""

    @staticmethod
    def tools_list(principal: str) -> str:
        """``tg.tools.list.<principal>``: the tools ``principal`` may call (answered by the policy service)."""
        return f"tg.tools.list.{principal}"

    @staticmethod
    def tools_get(principal: str) -> str:
        """``tg.tools.get.<principal>``: one tool as ``principal`` sees it (answered by the policy service)."""
        return f"tg.tools.get.{principal}"

    @staticmethod
    def records_get(principal: str) -> str:
        """``tg.records.get.<principal>``: one of ``principal``'s stored records (answered by the executor)."""
        return f"tg.records.get.{principal}"

    @staticmethod
    def approvals_decide(approver: str) -> str:
        """``tg.approvals.decide.<approver>``: the approver is the subject token."""
        return f"tg.approvals.decide.{approver}"

    @staticmethod
    def approvals_withdraw(principal: str) -> str:
        """``tg.approvals.withdraw.<principal>``: the requesting principal is the subject token."""
        return f"tg.approvals.withdraw.{principal}"

    @staticmethod
    def approvals_status(principal: str) -> str:
        """``tg.approvals.status.<principal>``: the requesting principal is the subject token."""
        return f"tg.approvals.status.{principal}"


@dataclass(frozen=True)
class ConsumerSpec:
    """A durable pull consumer on :data:`STREAM`.

    Attributes:
        durable: the durable name (also the NATS permission token).
        filter_subject: the one subject filter, ``None`` for every subject (or for ``filter_subjects``).
        max_deliver: delivery attempts per message; ``-1`` for unlimited.
        ack_wait_s: seconds a delivered message may stay unacknowledged before redelivery.
        max_ack_pending: messages delivered and not yet acknowledged, at most.
        filter_subjects: several filters instead of ``filter_subject`` (nats-server 2.10+;
            provisioning does not create such a consumer on an older server, which would
            ignore them and deliver every subject).
    """

    durable: str
    filter_subject: str | None
    max_deliver: int = 20
    ack_wait_s: float = 30.0
    max_ack_pending: int = 1000
    filter_subjects: tuple[str, ...] = ()


FAIR_ACK_PENDING: Final = 10_000
"""``max_ack_pending`` of the consumers served fair by principal: room for two replicas' fetch-ahead
windows (``EFFECTGATE_FAIR_WINDOW``) and their handlers."""

POLICY_CONSUMER: Final = ConsumerSpec("policy-requests", Subjects.REQUESTS, max_ack_pending=FAIR_ACK_PENDING)
APPROVALS_CONSUMER: Final = ConsumerSpec("approvals-decisions", Subjects.NEEDS_APPROVAL)
"""Only the decisions that need approval: the approvals service never sees the others."""
EXECUTOR_DECISIONS: Final = ConsumerSpec(
    "executor-decisions", Subjects.DECISIONS, ack_wait_s=10.0, max_ack_pending=FAIR_ACK_PENDING
)
"""A short ack wait: a killed executor's runs come back within seconds (a live run sends +WPI)."""
EXECUTOR_APPROVALS: Final = ConsumerSpec("executor-approvals", Subjects.APPROVALS, ack_wait_s=10.0)
BACKSTOP_CONSUMER: Final = ConsumerSpec("executor-backstop", Subjects.REQUESTS, max_deliver=-1, max_ack_pending=100_000)
"""Holds every request until it has a receipt; ends one that outlived every deadline."""
AUDIT_CONSUMER: Final = ConsumerSpec("audit-all", None, max_deliver=-1)
"""Never gives up on an event: the audit chain must hold every one, in order."""
CHATOPS_APPROVALS: Final = ConsumerSpec("chatops-approvals", Subjects.APPROVALS, max_deliver=-1)
"""The chat-ops bot's cards: never gives up (chat may be down for hours; the approval waits)."""
CHATOPS_RECEIPTS: Final = ConsumerSpec("chatops-receipts", Subjects.RECEIPTS, max_deliver=-1)
"""Receipts of calls that had a card: their outcome is posted in the card's thread."""
POLICY_RECEIPTS: Final = ConsumerSpec("policy-receipts", Subjects.RECEIPTS, max_deliver=-1)
"""Receipts settle spend reservations (commit, release, uncertain); never gives up on one."""
RECONCILER_CONSUMER: Final = ConsumerSpec("executor-reconciler", Subjects.RECEIPTS, max_deliver=-1)
"""Receipts, for the reconciler: each ``uncertain`` one whose operation declares ``reconcile`` is resolved
(its own bounds end the attempts, so the consumer never gives up)."""
POLICY_RESOLUTIONS: Final = ConsumerSpec("policy-resolutions", Subjects.RESOLUTIONS, max_deliver=-1)
"""Resolutions of ``uncertain`` calls settle their held spend reservations (``ran`` commits, ``not_run`` releases)."""
AUDITED_SUBJECTS: Final = (
    Subjects.DECISIONS,
    Subjects.APPROVALS_GRANTED,
    Subjects.APPROVALS_REJECTED,
    Subjects.RECEIPTS,
)
"""What the read-only auditor may read: every signed decision, approval outcome and receipt (no request)."""
AUDITOR_CONSUMER: Final = ConsumerSpec(
    "auditor-export", None, max_deliver=-1, ack_wait_s=5.0, max_ack_pending=1, filter_subjects=AUDITED_SUBJECTS
)
"""The auditor's export (e.g. to a SIEM): one record out at a time, so a redelivery after a crash comes
before any later record and the export stays in stream order; redelivered 5 s after a lost ack."""

ACCOUNT_JS_API: Final = f"JS.{STREAM}.API"
"""The JetStream API prefix (nats-py ``nc.jetstream(prefix=...)``) of a client account without JetStream
(the auditor's, the chat-ops bot's, the MCP surface's, the operator's): each imports the ``$JS.API``
subjects its user needs under this name (its own ``$JS.API.>`` answers that JetStream is not enabled there)."""

AUDITOR_JS_API: Final = ACCOUNT_JS_API
"""The auditor's JetStream API prefix (:data:`ACCOUNT_JS_API`): its one consumer's API, imported."""

CONSUMERS: Final = (
    POLICY_CONSUMER,
    APPROVALS_CONSUMER,
    EXECUTOR_DECISIONS,
    EXECUTOR_APPROVALS,
    BACKSTOP_CONSUMER,
    AUDIT_CONSUMER,
    CHATOPS_APPROVALS,
    CHATOPS_RECEIPTS,
    POLICY_RECEIPTS,
    AUDITOR_CONSUMER,
    RECONCILER_CONSUMER,
    POLICY_RESOLUTIONS,
)


# --- parsing: the catalog reads back the subjects it builds ------------------------------------

APPROVAL_KINDS: Final = ("requested", "voted", "granted", "rejected")
"""The ``<kind>`` token of ``tg.approval.<kind>.<principal>.<request_id>``."""

_PER_REQUEST: Final = ("decision", "needs_approval", "receipt", "resolution")
"""The ``tg.<kind>.<principal>.<request_id>`` event subjects."""


class RequestSubject(NamedTuple):
    """The request a per-request event subject names.

    Attributes:
        kind: ``decision``, ``needs_approval``, ``receipt``, or ``approval.<kind>``
            (:data:`APPROVAL_KINDS`).
        principal: the principal token.
        request_id: the request id token.
    """

    kind: str
    principal: str
    request_id: str


class AboutRequest(Protocol):
    """An event about one request: its principal and request id."""

    @property
    def principal(self) -> str:
        """The principal whose request it is."""
        ...

    @property
    def request_id(self) -> str:
        """The request."""
        ...


def _tokens(subject: str, count: int) -> list[str] | None:
    """The ``count`` tokens of ``subject`` after ``tg``, each a :data:`TOKEN` but the first; else ``None``."""
    tokens = subject.split(".")
    if len(tokens) != count + 1 or tokens[0] != "tg" or not all(TOKEN.match(t) for t in tokens[2:]):
        return None
    return tokens[1:]


def request_subject_of(subject: str) -> RequestSubject | None:
    """The request a per-request event subject names; ``None`` for any other subject.

    Per-request: ``tg.<decision|needs_approval|receipt>.<principal>.<request_id>`` and
    ``tg.approval.<kind>.<principal>.<request_id>``. Foreign: another shape, a wildcard, an
    empty or extra token, a token that is no :data:`TOKEN`.
    """
    if (approval := _tokens(subject, 4)) is not None and approval[0] == "approval" and approval[1] in APPROVAL_KINDS:
        return RequestSubject(f"approval.{approval[1]}", approval[2], approval[3])
    if (event := _tokens(subject, 3)) is not None and event[0] in _PER_REQUEST:
        return RequestSubject(event[0], event[1], event[2])
    return None


def principal_of_request(subject: str) -> str | None:
    """The principal of ``tg.req.<principal>``, or ``None`` when ``subject`` is not a request subject."""
    tokens = _tokens(subject, 2)
    return tokens[1] if tokens is not None and tokens[0] == "req" else None


def principal_of_event(subject: str) -> str | None:
    """The principal of ``tg.req.<principal>`` or of a per-request event subject; ``None`` for any other subject."""
    named = request_subject_of(subject)
    return named.principal if named is not None else principal_of_request(subject)


def claimed_principal_of_request(subject: str) -> str | None:
    """Whatever ``tg.req.`` is followed by, unchecked, so that a principal no :data:`TOKEN` can be refused by name."""
    return subject.removeprefix("tg.req.") if subject.startswith("tg.req.") and subject != "tg.req." else None


def request_id_of(subject: str) -> str | None:
    """The request id a per-request event subject names (:func:`request_subject_of`), else ``None``."""
    named = request_subject_of(subject)
    return None if named is None else named.request_id


def names_request(subject: str, principal: str, request_id: str) -> bool:
    """Whether ``subject`` is a per-request event subject of ``principal``'s ``request_id``."""
    named = request_subject_of(subject)
    return named is not None and (named.principal, named.request_id) == (principal, request_id)


def names_its_request(subject: str, event: AboutRequest) -> bool:
    """Whether ``event`` is about the request its ``subject`` names (never for a foreign subject)."""
    return names_request(subject, event.principal, event.request_id)


def matches(pattern: str, subject: str) -> bool:
    """NATS matching of ``subject`` against ``pattern`` whose wildcards are ``*`` only (one token each).

    A subject with an empty token never matches; ``*`` in the subject matches only ``*``.
    """
    wanted, tokens = pattern.split("."), subject.split(".")
    if len(wanted) != len(tokens) or not all(tokens):
        return False
    return all(w in ("*", t) for w, t in zip(wanted, tokens, strict=True))


def token_of(pattern: str, subject: str) -> str | None:
    """The token ``subject`` has where ``pattern`` (e.g. ``Rpc.APPROVALS_DECIDE``) has its one ``*``.

    ``None`` when ``subject`` does not match ``pattern`` or that token is no :data:`TOKEN`.

    Raises:
        ValueError: ``pattern`` has not exactly one ``*``.
    """
    wanted = pattern.split(".")
    if wanted.count("*") != 1:
        raise ValueError(f"{pattern!r} has not exactly one wildcard token")
    if not matches(pattern, subject):
        return None
    token = subject.split(".")[wanted.index("*")]
    return token if TOKEN.match(token) else None


_RUN = re.compile(r"^[A-Za-z0-9_-]{1,128}\Z")
"""A run id token of a result chunk subject (``<request id>_<nonce>``: longer than one :data:`TOKEN`)."""

_INDEX = re.compile(r"^(0|[1-9][0-9]{0,8})\Z")
"""A chunk index token: a decimal number without a sign or leading zero."""


class StoredRecord(NamedTuple):
    """A stored record an agent may read back: whose, and in which stream.

    Attributes:
        kind: ``receipt``, ``decision`` or ``result`` (a result chunk, or a receipt's kept detail).
        principal: the principal token.
        stream: :data:`STREAM` (receipts, decisions) or :data:`RESULTS_STREAM` (result chunks).
    """

    kind: str
    principal: str
    stream: str


def stored_record_of(subject: str) -> StoredRecord | None:
    """The stored record an agent may read back that ``subject`` names, else ``None``.

    Records: ``tg.receipt.<p>.<rid>``, ``tg.decision.<p>.<rid>``, ``tg.result.<p>.<run id>.<index>``.
    Any other subject, a wildcard, an empty token or an index with a sign or a leading zero: ``None``.
    """
    named = request_subject_of(subject)
    if named is not None and named.kind in ("receipt", "decision"):
        return StoredRecord(named.kind, named.principal, STREAM)
    tokens = subject.split(".")
    if len(tokens) != 5 or tokens[:2] != ["tg", "result"] or not TOKEN.match(tokens[2]):
        return None
    if not _RUN.match(tokens[3]) or not _INDEX.match(tokens[4]):
        return None
    return StoredRecord("result", tokens[2], RESULTS_STREAM)


def security_of(subject: str) -> tuple[str, str] | None:
    """``(service, kind)`` of ``tg.security.<service>.<kind>``, else ``None``."""
    tokens = _tokens(subject, 3)
    return (tokens[1], tokens[2]) if tokens is not None and tokens[0] == "security" else None
