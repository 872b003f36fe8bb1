"""The one catalog of bus names: subjects, the stream, durable consumers, KV buckets.

No other module spells a subject. Event subjects carry the principal in a fixed
position so one NATS permission rule per principal works (``tg.req.<principal>``),
and the request id last where a subject must be unique per request (receipts are
published with ``Nats-Expected-Last-Subject-Sequence: 0``: one receipt per request).

Flow::

    agent --tg.req.<p>--> policy --tg.decision.<p>.<rid>--> executor --tg.receipt.<p>.<rid>--> agent
                            |                                   ^
                            +--> approvals --tg.approval.granted|rejected.<p>.<rid>--+
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "APPROVALS_CONSUMER",
    "EXECUTOR_APPROVALS",
    "EXECUTOR_DECISIONS",
    "POLICY_CONSUMER",
    "AUDIT_CONSUMER",
    "CONSUMERS",
    "STREAM",
    "STREAM_SUBJECTS",
    "TOKEN",
    "TOOLS_BUCKET",
    "ConsumerSpec",
    "Rpc",
    "Subjects",
]

TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a principal, approver or request id may be: one safe subject token."""

STREAM: Final = "TOOLGATE"
TOOLS_BUCKET: Final = "TOOLGATE_TOOLS"

STREAM_SUBJECTS: Final = (
    "tg.req.*",
    "tg.decision.*.*",
    "tg.approval.*.*.*",
    "tg.receipt.*.*",
    "tg.tool.published.*",
)


class Subjects:
    """Builders for every event subject; arguments must match :data:`TOKEN`."""

    REQUESTS: Final = "tg.req.*"
    DECISIONS: Final = "tg.decision.*.*"
    APPROVALS: Final = "tg.approval.*.*.*"
    RECEIPTS: Final = "tg.receipt.*.*"

    @staticmethod
    def request(principal: str) -> str:
        """``tg.req.<principal>``: where an agent publishes :class:`ToolRequested`."""
        return f"tg.req.{principal}"

    @staticmethod
    def decision(principal: str, request_id: str) -> str:
        """``tg.decision.<principal>.<request_id>``: :class:`DecisionMade`."""
        return f"tg.decision.{principal}.{request_id}"

    @staticmethod
    def approval(kind: str, principal: str, request_id: str) -> str:
        """``tg.approval.<requested|granted|rejected>.<principal>.<request_id>``."""
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
    def tool_published(tool: str) -> str:
        """``tg.tool.published.<tool>``: :class:`ToolPublished`."""
        return f"tg.tool.published.{tool}"


class Rpc:
    """Request/reply subjects (core NATS, not in the stream)."""

    REGISTRY_PUBLISH: Final = "tg.registry.publish"
    REGISTRY_GET: Final = "tg.registry.get"
    REGISTRY_LIST: Final = "tg.registry.list"
    APPROVALS_LIST: Final = "tg.approvals.list"
    APPROVALS_DECIDE: Final = "tg.approvals.decide.*"
    AUDIT_TRAIL: Final = "tg.audit.trail"
    AUDIT_VERIFY: Final = "tg.audit.verify"

    @staticmethod
    def approvals_decide(approver: str) -> str:
        """``tg.approvals.decide.<approver>``: the approver is the subject token."""
        return f"tg.approvals.decide.{approver}"


class ConsumerSpec:
    """A durable pull consumer on :data:`STREAM`."""

    def __init__(self, durable: str, filter_subject: str | None) -> None:
        self.durable = durable
        self.filter_subject = filter_subject

    def __repr__(self) -> str:
        return f"ConsumerSpec({self.durable!r}, {self.filter_subject!r})"


POLICY_CONSUMER: Final = ConsumerSpec("policy-requests", Subjects.REQUESTS)
APPROVALS_CONSUMER: Final = ConsumerSpec("approvals-decisions", Subjects.DECISIONS)
EXECUTOR_DECISIONS: Final = ConsumerSpec("executor-decisions", Subjects.DECISIONS)
EXECUTOR_APPROVALS: Final = ConsumerSpec("executor-approvals", Subjects.APPROVALS)
AUDIT_CONSUMER: Final = ConsumerSpec("audit-all", None)

CONSUMERS: Final = (
    POLICY_CONSUMER,
    APPROVALS_CONSUMER,
    EXECUTOR_DECISIONS,
    EXECUTOR_APPROVALS,
    AUDIT_CONSUMER,
)
