"""Pins the bus contract: subjects, stream, consumers, and the event types on the wire."""

from __future__ import annotations

import msgspec

from effectgate.contracts import events
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects


def test_subject_builders_are_pinned() -> None:
    assert Subjects.request("a") == "tg.req.a"
    assert Subjects.decision("a", "r") == "tg.decision.a.r"
    assert Subjects.approval("granted", "a", "r") == "tg.approval.granted.a.r"
    assert Subjects.receipt("a", "r") == "tg.receipt.a.r"
    assert Subjects.receipts_of("a") == "tg.receipt.a.*"
    assert (Subjects.progress("a", "r"), Subjects.progress_of("a")) == ("tg.progress.a.r", "tg.progress.a.*")
    assert Subjects.tool_published("t") == "tg.tool.published.t"
    assert (Subjects.tool_state("t"), Subjects.TOOL_STATES) == ("tg.tool.state.t", "tg.tool.state.*")
    assert Subjects.claim("a", "k") == "tg.claim.a.k"
    assert Subjects.result_chunk("a", "r", 3) == "tg.result.a.r.3"
    assert Subjects.results_of("a") == "tg.result.a.>"
    assert Rpc.POLICY_RECHECK == "tg.policy.recheck"
    assert Rpc.POLICY_READY == "tg.policy.ready"
    assert (Rpc.tools_list("a"), Rpc.tools_get("a")) == ("tg.tools.list.a", "tg.tools.get.a")
    assert (Rpc.TOOLS_LIST, Rpc.TOOLS_GET) == ("tg.tools.list.*", "tg.tools.get.*")
    assert Rpc.approvals_decide("alice") == "tg.approvals.decide.alice"
    assert Rpc.approvals_withdraw("a") == "tg.approvals.withdraw.a"
    assert Rpc.APPROVALS_WITHDRAW == "tg.approvals.withdraw.*"
    assert Subjects.decisions_of("a") == "tg.decision.a.*"
    assert Subjects.security("executor", "decision_forged") == "tg.security.executor.decision_forged"
    assert Subjects.security_of("audit") == "tg.security.audit.*"
    assert Subjects.alarm("approval_refused") == "tg.alarm.approval_refused" and Subjects.ALARMS == "tg.alarm.*"
    assert Rpc.AUDIT_ALARMS == "tg.audit.alarms"
    assert Rpc.AUDIT_REQUESTS == "tg.audit.requests"
    assert Rpc.POLICY_PUBLISH == "tg.policy.publish" and Subjects.POLICY_PUBLISHED == "tg.policy.published"
    assert Subjects.POLICY_CURRENT == Subjects.policy_kv("current") == "$KV.EFFECTGATE_POLICY.current"
    assert (Rpc.POLICY_BUDGETS, Rpc.POLICY_BUDGETS_RESOLVE) == ("tg.policy.budgets", "tg.policy.budgets.resolve")


def test_stream_and_consumers_are_pinned() -> None:
    assert catalog.STREAM == "EFFECTGATE" and catalog.TOOLS_BUCKET == "EFFECTGATE_TOOLS"
    assert catalog.STREAM_SUBJECTS == (
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
    assert catalog.RESULTS_STREAM == "EFFECTGATE_RESULTS" and catalog.RESULTS_SUBJECTS == ("tg.result.*.*.*",)
    assert {(c.durable, c.filter_subjects or c.filter_subject, c.max_deliver) for c in catalog.CONSUMERS} == {
        ("policy-requests", "tg.req.*", 20),
        ("approvals-decisions", "tg.needs_approval.*.*", 20),
        ("executor-decisions", "tg.decision.*.*", 20),
        ("executor-approvals", "tg.approval.*.*.*", 20),
        ("executor-backstop", "tg.req.*", -1),
        ("audit-all", None, -1),
        ("chatops-approvals", "tg.approval.*.*.*", -1),
        ("chatops-receipts", "tg.receipt.*.*", -1),
        ("policy-receipts", "tg.receipt.*.*", -1),
        ("executor-reconciler", "tg.receipt.*.*", -1),
        ("policy-resolutions", "tg.resolution.*.*", -1),
        (
            "auditor-export",
            ("tg.decision.*.*", "tg.approval.granted.*.*", "tg.approval.rejected.*.*", "tg.receipt.*.*"),
            -1,
        ),
    }
    assert catalog.CARDS_BUCKET == "EFFECTGATE_CHAT_CARDS" and catalog.POLICY_BUCKET == "EFFECTGATE_POLICY"


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    return len(p) == len(s) and all(a in ("*", b) for a, b in zip(p, s, strict=True))


def test_every_event_subject_is_in_the_stream_and_rpc_subjects_are_not() -> None:
    event_subjects = [
        Subjects.request("a"),
        Subjects.decision("a", "r"),
        Subjects.receipt("a", "r"),
        Subjects.resolution("a", "r"),
        Subjects.tool_published("t"),
        Subjects.tool_state("t"),
        Subjects.claim("a", "k"),
        Subjects.security("approvals", "approval_refused"),
        Subjects.POLICY_PUBLISHED,
    ] + [Subjects.approval(k, "a", "r") for k in ("requested", "granted", "rejected")]
    for subject in event_subjects:
        assert sum(_matches(p, subject) for p in catalog.STREAM_SUBJECTS) == 1, subject
    rpc = [v for k, v in vars(Rpc).items() if k.isupper()]
    assert rpc and not any(_matches(p, s.replace("*", "x")) for p in catalog.STREAM_SUBJECTS for s in rpc)
    assert not any(_matches(p, Subjects.alarm("k")) for p in catalog.STREAM_SUBJECTS), "alarms are core NATS only"


def test_event_tags_are_pinned_and_unique() -> None:
    tags = {cls.__name__: cls.__struct_config__.tag for cls in events.AnyEvent.__args__}  # type: ignore[attr-defined]
    assert tags == {
        "ToolRequested": "tool.requested",
        "DecisionMade": "decision.made",
        "ApprovalRequested": "approval.requested",
        "ApprovalGranted": "approval.granted",
        "ApprovalRejected": "approval.rejected",
        "ApprovalVoted": "approval.voted",
        "ReceiptIssued": "receipt.issued",
        "EffectClaimed": "effect.claimed",
        "ToolPublished": "tool.published",
        "ToolStateChanged": "tool.state.changed",
        "UncertainResolved": "uncertain.resolved",
        "PolicyPublished": "policy.published",
        "SecurityEvent": "security.event",
    }


def test_events_are_frozen_and_required_fields_are_pinned() -> None:
    """Evolution adds only defaulted fields: the required set of each event may not change."""
    required = {}
    for cls in events.AnyEvent.__args__:  # type: ignore[attr-defined]
        assert cls.__struct_config__.frozen
        info = msgspec.inspect.type_info(cls)
        required[cls.__name__] = sorted(f.name for f in info.fields if f.required)
    assert required == {
        "ToolRequested": ["arguments", "event_id", "idempotency_key", "occurred_at", "operation", "request_id", "tool"],
        "DecisionMade": ["event_id", "occurred_at", "principal", "reason", "reason_code", "request_id", "verdict"],
        "ApprovalRequested": [
            "approval_id",
            "approver_role",
            "event_id",
            "expires_at",
            "occurred_at",
            "principal",
            "request",
            "request_hash",
            "request_id",
        ],
        "ApprovalGranted": [
            "approval_id",
            "approver",
            "event_id",
            "expires_at",
            "occurred_at",
            "principal",
            "request_hash",
            "request_id",
        ],
        "ApprovalRejected": [
            "approval_id",
            "event_id",
            "occurred_at",
            "principal",
            "reason",
            "reason_code",
            "request_id",
        ],
        "ApprovalVoted": [
            "approval_id",
            "approver",
            "event_id",
            "occurred_at",
            "principal",
            "request_hash",
            "request_id",
        ],
        "ReceiptIssued": ["event_id", "occurred_at", "outcome", "principal", "reason", "reason_code", "request_id"],
        "EffectClaimed": [
            "effect_id",
            "event_id",
            "instance",
            "key_digest",
            "occurred_at",
            "principal",
            "request_hash",
            "request_id",
        ],
        "ToolPublished": ["digest", "event_id", "occurred_at", "tool", "version"],
        "PolicyPublished": ["event_id", "occurred_at", "source", "version"],
        "SecurityEvent": ["event_id", "kind", "occurred_at", "service"],
        "ToolStateChanged": ["event_id", "occurred_at", "server", "state", "tool"],
        "UncertainResolved": [
            "event_id",
            "occurred_at",
            "principal",
            "receipt_id",
            "request_id",
            "resolution",
            "resolved_by",
        ],
    }


def test_tool_request_has_no_principal_field() -> None:
    assert "principal" not in events.ToolRequested.__struct_fields__
