"""The reconciliation check's comparison of counters with receipts: pure."""

from __future__ import annotations

import msgspec
import pytest

from effectgate.policy.budgets.ledger import BudgetCounter, Held
from effectgate.policy.budgets.reconciliation import differences, pending, receipt_outcomes


def counter(records: dict[str, Held], used: int | None = None, reserved: int | None = None) -> BudgetCounter:
    committed = sum(h.units for h in records.values() if h.state == "committed")
    held = sum(h.units for h in records.values() if h.state in ("reserved", "uncertain"))
    return BudgetCounter(
        principal="agent",
        budget="daily",
        start_s=0,
        window_s=86_400,
        limit_units=100,
        used_units=committed if used is None else used,
        reserved_units=held if reserved is None else reserved,
        records=records,
    )


@pytest.mark.parametrize(
    ("state", "outcome", "kind"),
    [
        ("committed", "succeeded", None),
        ("committed", "uncertain", None),  # resolved as run
        ("committed", "failed", "committed_without_success"),
        ("committed", None, "committed_without_success"),
        ("released", "failed", None),
        ("released", "denied", None),
        ("released", "replayed", None),
        ("released", "uncertain", None),  # resolved as not run
        ("released", "succeeded", "success_not_committed"),
        ("released", None, "released_without_receipt"),
        ("uncertain", "uncertain", None),
        ("uncertain", "succeeded", "success_not_committed"),
        ("uncertain", "failed", "uncertain_mismatch"),
        ("reserved", None, None),  # still running
        ("reserved", "succeeded", "receipt_not_applied"),
        ("reserved", "failed", "receipt_not_applied"),
    ],
)
def test_each_record_is_judged_by_its_receipt(state: str, outcome: str | None, kind: str | None) -> None:
    receipts = {("agent", "r1"): outcome} if outcome else {}
    found = differences([counter({"r1": Held(state, 10)})], receipts)
    assert [d.kind for d in found] == ([kind] if kind else [])
    if found:
        assert found[0].request_id == "r1" and found[0].budget == "daily"


def test_a_counter_must_be_the_sum_of_its_records() -> None:
    records = {
        "a": Held("committed", 10),
        "b": Held("reserved", 5),
        "c": Held("uncertain", 7),
        "d": Held("released", 3),
    }
    receipts = {("agent", "a"): "succeeded", ("agent", "c"): "uncertain", ("agent", "d"): "failed"}
    assert differences([counter(records)], receipts) == []
    [found] = differences([counter(records, used=11)], receipts)
    assert (found.kind, found.request_id) == ("counter_mismatch", None)
    assert "used 11, reserved 12" in found.detail and "used 10, reserved 12" in found.detail


def test_running_and_uncertain_calls_are_pending_not_differences() -> None:
    records = {"run": Held("reserved", 5), "unk": Held("uncertain", 7)}
    receipts = {("agent", "unk"): "uncertain"}
    assert differences([counter(records)], receipts) == []
    assert [(p.kind, p.request_id) for p in pending([counter(records)], receipts)] == [
        ("in_flight", "run"),
        ("awaiting_resolution", "unk"),
    ]


def test_receipts_are_read_from_audit_records_first_one_wins() -> None:
    def record(event_type: str, body: object) -> dict[str, object]:
        return {"event_type": event_type, "payload": msgspec.json.encode(body).decode()}

    records = [
        record("decision.made", {"principal": "a", "request_id": "r1", "outcome": "succeeded"}),
        record("receipt.issued", {"principal": "a", "request_id": "r1", "outcome": "failed"}),
        record("receipt.issued", {"principal": "a", "request_id": "r1", "outcome": "succeeded"}),
        record("receipt.issued", {"principal": "a", "request_id": "r2"}),
        {"event_type": "receipt.issued", "payload": "not json"},
    ]
    assert receipt_outcomes(records) == {("a", "r1"): "failed"}
