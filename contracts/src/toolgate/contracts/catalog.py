"""The one catalog of bus names: subjects, streams, durable consumers, KV buckets.

No other module spells a subject. Event subjects carry the principal in a fixed
position so one NATS permission rule per principal works (``tg.req.<principal>``),
and the request id last where a subject must be unique per request (receipts are
published with ``Nats-Expected-Last-Subject-Sequence: 0``: one receipt per request).

Flow::

    agent --tg.req.<p>--> policy --tg.decision.<p>.<rid>--> executor --tg.receipt.<p>.<rid>--> agent
                            |                                   ^
                            +--tg.needs_approval.<p>.<rid>--> approvals --tg.approval.granted|rejected.<p>.<rid>--+

A decision is published once, on ``tg.decision.<p>.<rid>`` (first on its subject: the
one the executor reads). When it needs approval the policy also copies it, signed as it
is, to ``tg.needs_approval.<p>.<rid>``: the approvals service consumes only those, so
the decisions that run or are denied cost it nothing.

A requester may withdraw its own call while its approval is pending, on the core
request/reply subject ``tg.approvals.withdraw.<p>`` (:class:`Rpc`); the approvals service
ends it with a signed rejection (reason code ``withdrawn``).

The executor also records each write's claim on ``tg.claim.<p>.<key digest>`` (the
durable half of the at-most-once record) and keeps results too large for one message
in the results stream, on ``tg.result.<p>.<rid>_<nonce>.<chunk>`` (one run's chunks). The policy in force lives in the
KV bucket :data:`POLICY_BUCKET` (every policy replica follows its ``current`` key) and each
publication is recorded on ``tg.policy.published``. The executor announces each change of an
MCP server's state on ``tg.tool.state.<tool>``; the registry keeps the latest in the tools
bucket (``state.<tool>``). Any service records a refused
attempt on ``tg.security.<service>.<kind>`` (in the stream); the audit announces each one it
records on the core subject ``tg.alarm.<kind>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "APPROVALS_CONSUMER",
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
    "POLICY_CONSUMER",
    "POLICY_RECEIPTS",
    "RESULTS_STREAM",
    "RESULTS_SUBJECTS",
    "STREAM",
    "STREAM_SUBJECTS",
    "TOKEN",
    "TOOLS_BUCKET",
    "ConsumerSpec",
    "Rpc",
    "Subjects",
]

TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
"""What a principal, approver or request id may be: one safe subject token."""

STREAM: Final = "TOOLGATE"
"""The record: every event of every request (audited)."""

RESULTS_STREAM: Final = "TOOLGATE_RESULTS"
"""Results too large for one message, in compressed chunks; the receipt holds their digest."""

TOOLS_BUCKET: Final = "TOOLGATE_TOOLS"

POLICY_BUCKET: Final = "TOOLGATE_POLICY"
"""The policy in force (``current``), every published text (``v.<hex>``) and the seeded file's digest (``file``)."""

CARDS_BUCKET: Final = "TOOLGATE_CHAT_CARDS"
"""The chat-ops bot's record of each approval card (room and message ids), keyed by approval id."""

MCP_CALLS_BUCKET: Final = "TOOLGATE_MCP_CALLS"
"""The MCP surface's ledger of calls (``<principal>.<call digest>``): which request a client's re-send belongs to."""

MCP_CALLS_MAX_AGE_S: Final = 86_400.0
"""How long the ledger keeps a call (seconds): longer than any approval waits."""

STREAM_SUBJECTS: Final = (
    "tg.req.*",
    "tg.decision.*.*",
    "tg.needs_approval.*.*",
    "tg.approval.*.*.*",
    "tg.receipt.*.*",
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
        head, _, principal = subject.rpartition(".")
        return principal if head == "tg.req" and TOKEN.match(principal) else None

    @staticmethod
    def needs_approval_of(subject: str) -> tuple[str, str] | None:
        """``(principal, request_id)`` of ``tg.needs_approval.<principal>.<request_id>``, else ``None``."""
        parts = subject.split(".")
        if len(parts) != 4 or parts[:2] != ["tg", "needs_approval"] or not all(map(TOKEN.match, parts[2:])):
            return None
        return parts[2], parts[3]

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
    def claim(principal: str, key_digest: str) -> str:
        """``tg.claim.<principal>.<key digest>``: the first :class:`EffectClaimed` of one idempotency key."""
        return f"tg.claim.{principal}.{key_digest}"

    @staticmethod
    def result_chunk(principal: str, request_id: str, index: int) -> str:
        """``tg.result.<principal>.<request_id>.<index>``: one chunk of a stored result.

        The executor passes a run id (``<request id>_<nonce>``) as ``request_id``: each run's chunks are its own.
        """
        return f"tg.result.{principal}.{request_id}.{index}"

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
        """``$KV.TOOLGATE_POLICY.<key>``: where a key of :data:`POLICY_BUCKET` is written (NATS ADR-8).

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
    """Operators, approvers, chat-ops: pending approvals, in pages (:mod:`toolgate.contracts.paging`)."""
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

    @staticmethod
    def tools_list(principal: str) -> str:
        """``tg.tools.list.<principal>``: the tools ``principal`` may call (answered by the policy service)."""
        return f"tg.tools.list.{principal}"

    @staticmethod
    def tools_get(principal: str) -> str:
        """``tg.tools.get.<principal>``: one tool as ``principal`` sees it (answered by the policy service)."""
        return f"tg.tools.get.{principal}"

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
        filter_subject: the one subject filter, ``None`` for every subject.
        max_deliver: delivery attempts per message; ``-1`` for unlimited.
        ack_wait_s: seconds a delivered message may stay unacknowledged before redelivery.
        max_ack_pending: messages delivered and not yet acknowledged, at most.
    """

    durable: str
    filter_subject: str | None
    max_deliver: int = 20
    ack_wait_s: float = 30.0
    max_ack_pending: int = 1000


POLICY_CONSUMER: Final = ConsumerSpec("policy-requests", Subjects.REQUESTS)
APPROVALS_CONSUMER: Final = ConsumerSpec("approvals-decisions", Subjects.NEEDS_APPROVAL)
"""Only the decisions that need approval: the approvals service never sees the others."""
EXECUTOR_DECISIONS: Final = ConsumerSpec("executor-decisions", Subjects.DECISIONS, ack_wait_s=10.0)
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
)
