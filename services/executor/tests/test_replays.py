"""A replay carries the stored outcome whole: its outcome, reason code, reason, result or error, and redactions."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from effectgate.contracts.events import ReceiptIssued, ResultRef
from effectgate.contracts.replays import ended_as, outcome_label
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.domain import replay_receipt
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown, ToolRefused, ToolTimeout

READ, WRITE = ("read", {"path": "a.txt"}), ("write", {"path": "a.txt", "content": "x"})
SECRET = "AKIA" + "Z" * 16


def _raise(error: BaseException) -> Any:
    def behave(arguments: dict[str, Any]) -> Any:
        raise error

    return behave


async def _hang(arguments: dict[str, Any]) -> Any:
    await asyncio.Event().wait()


def _read_result(arguments: dict[str, Any]) -> Any:
    content = f"key={SECRET}"
    return {"path": "a.txt", "content": content, "size_bytes": len(content), "sha256": "0" * 64}


STORED = [
    (_raise(ToolFailed("tool_error", "Error: order not found")), WRITE, "failed"),
    (_raise(ToolFailed("tool_error", "Error: order not found")), READ, "failed"),
    (_raise(ToolRefused("path_outside_sandbox", "'../x' is outside the sandbox")), WRITE, "refused"),
    (_raise(ToolOutcomeUnknown("connection_lost", "the server went away")), WRITE, "uncertain"),
    (_raise(ToolTimeout(reason="no answer in 30s")), WRITE, "uncertain"),
    (lambda arguments: {"unexpected": True}, WRITE, "uncertain"),
    (_raise(ToolFailed("tool_error", f"Error: bad token {SECRET}")), WRITE, "failed"),
    (_read_result, READ, "succeeded"),
]
STORED_IDS = ["failed-write", "failed-read", "refused", "connection-lost", "timeout", "output-invalid"]
STORED_IDS += ["secret-in-reason", "succeeded"]


@pytest.mark.parametrize(("behave", "call", "outcome"), STORED, ids=STORED_IDS)
async def test_a_replay_carries_the_stored_outcome_whole(
    scripted: Any, behave: Any, call: tuple[str, dict[str, Any]], outcome: str
) -> None:
    harness, tool = scripted(behave)
    await harness.executor.on_decision(harness.decision(*call))
    await harness.executor.on_decision(harness.decision(*call, rid="r2"))
    first, replay = harness.bus.receipts["r1"], harness.bus.receipts["r2"]
    assert tool.calls == 1 and first.outcome == outcome
    assert (replay.outcome, replay.replay_outcome, replay.replay_of) == (Outcome.REPLAYED, first.outcome, "r1")
    assert (replay.reason_code, replay.reason) == (first.reason_code, first.reason), "the stored reason, whole"
    assert (replay.result, replay.result_ref, replay.effect_id) == (first.result, first.result_ref, first.effect_id)
    assert replay.redactions == first.redactions and replay.duration_ms is None
    assert SECRET not in msgspec.json.encode(replay).decode()


async def test_a_replay_of_a_write_interrupted_by_a_crash_says_it_is_uncertain(scripted: Any) -> None:
    harness, _ = scripted(_hang)
    short = msgspec.structs.replace(harness.descriptor, timeout_s=0.1)
    harness.executor.descriptors.by_name["file_system"] = short
    harness.descriptor = short
    await asyncio.wait_for(harness.executor.on_decision(harness.decision(*WRITE)), 5)
    await harness.executor.on_decision(harness.decision(*WRITE, rid="r2"))
    replay = harness.bus.receipts["r2"]
    assert (replay.replay_outcome, replay.reason_code) == (Outcome.UNCERTAIN, "tool_timeout")
    assert "reconcile" in replay.reason and outcome_label(replay) == "replayed uncertain"


def _stored(outcome: Outcome, **fields: Any) -> ReceiptIssued:
    base: dict[str, Any] = {
        "event_id": "receipt:p:r1",
        "occurred_at": datetime.now(UTC),
        "request_id": "r1",
        "principal": "p",
        "outcome": outcome,
        "reason_code": "approval_expired",
        "reason": "the approval expired before use",
        "redactions": ("/reason",),
    }
    return ReceiptIssued(**{**base, **fields})


@pytest.mark.parametrize(
    "stored",
    [
        _stored(Outcome.DENIED),
        _stored(Outcome.REFUSED, reason_code="tool_unavailable", reason="mcp_git is unavailable"),
        _stored(Outcome.UNCERTAIN, reason_code="execution_interrupted", effect_id="effect:p:00"),
        _stored(
            Outcome.SUCCEEDED,
            reason_code="ok",
            result_ref=ResultRef(
                subject_prefix="tg.result.p.r1_ab", chunks=2, size_bytes=9, stored_bytes=5, sha256="s"
            ),
            redactions=("/result/rows/3/dsn",),
        ),
    ],
    ids=["denied", "refused", "uncertain", "succeeded-out-of-band"],
)
def test_replay_receipt_keeps_every_part_of_the_stored_outcome(harness: Any, stored: ReceiptIssued) -> None:
    decision = harness.decision(*READ, rid="r2")
    replay = replay_receipt(decision, datetime.now(UTC), stored)
    assert (replay.outcome, replay.replay_outcome, ended_as(replay)) == (
        Outcome.REPLAYED,
        stored.outcome,
        stored.outcome,
    )
    kept = ("reason_code", "reason", "result", "result_ref", "effect_id", "redactions")
    assert [getattr(replay, name) for name in kept] == [getattr(stored, name) for name in kept]
    assert (replay.request_id, replay.replay_of, replay.event_id) == ("r2", "r1", "receipt:demo-agent:r2")
    again = replay_receipt(harness.decision(*READ, rid="r3"), datetime.now(UTC), replay)
    assert (again.replay_of, again.replay_outcome, again.reason) == ("r1", stored.outcome, stored.reason)


def test_a_replay_from_an_executor_that_did_not_name_the_outcome_reads_as_what_it_says() -> None:
    old = _stored(Outcome.REPLAYED, reason_code="ok", reason="replay of request r0 (succeeded)", replay_of="r0")
    assert (ended_as(old), outcome_label(old)) == (Outcome.SUCCEEDED, "replayed succeeded")
    unsaid = msgspec.structs.replace(old, reason_code="tool_error")
    assert (ended_as(unsaid), outcome_label(unsaid)) == (Outcome.REPLAYED, "replayed")
    assert outcome_label(_stored(Outcome.FAILED)) == "failed"
