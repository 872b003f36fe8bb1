"""What a run ends as: unknown is uncertain for a write, large results are kept out of band, shutdown aborts."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import logging
from typing import Any

import msgspec
import pytest

from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown, ToolRefused, ToolTimeout
from effectgate.shared.consumer.acks import Settle

READ, WRITE = ("read", {"path": "a.txt"}), ("write", {"path": "a.txt", "content": "x"})


def _raise(error: BaseException) -> Any:
    def behave(arguments: dict[str, Any]) -> Any:
        raise error

    return behave


async def _hang(arguments: dict[str, Any]) -> Any:
    await asyncio.Event().wait()


ENDINGS = [
    (_raise(ToolOutcomeUnknown("connection_lost", "gone")), "uncertain", "failed"),
    (_raise(ToolOutcomeUnknown("malformed_reply", "garbage")), "uncertain", "failed"),
    (_raise(ToolTimeout(reason="slow")), "uncertain", "failed"),
    (_raise(RuntimeError("adapter bug")), "uncertain", "failed"),
    (_raise(asyncio.CancelledError()), "uncertain", "failed"),
    (_raise(ToolFailed("tool_error", "quota exceeded, nothing was done")), "failed", "failed"),
    (_raise(ToolFailed("server_unavailable", "did not start")), "failed", "failed"),
    (_raise(ToolRefused("path_outside_sandbox", "no")), "refused", "refused"),
    (lambda arguments: {"path": "a.txt", "size_bytes": 2**60, "sha256": "x", "created": True}, "uncertain", None),
    (lambda arguments: {"unexpected": True}, "uncertain", "failed"),
]
ENDING_IDS = ["lost", "malformed", "timeout", "bug", "leaked-cancel", "tool-error", "unstartable", "refused"]
ENDING_IDS += ["big-int", "schema"]


@pytest.mark.parametrize(("behave", "write", "read"), ENDINGS, ids=ENDING_IDS)
async def test_an_unknown_outcome_is_uncertain_for_a_write_and_failed_for_a_read(
    scripted: Any, behave: Any, write: str, read: str | None
) -> None:
    for (operation, arguments), expected in ((WRITE, write), (READ, read)):
        if expected is None:
            continue
        harness, _ = scripted(behave)
        assert await harness.executor.on_decision(harness.decision(operation, arguments)) is Settle.ACK
        issued = harness.bus.receipts["r1"]
        assert issued.outcome == expected, (operation, issued.reason_code, issued.reason)
        if expected == "uncertain":
            assert "reconcile" in issued.reason and issued.effect_id


async def test_a_call_past_its_timeout_is_cut_off_and_uncertain(scripted: Any) -> None:
    harness, tool = scripted(_hang)
    short = msgspec.structs.replace(harness.descriptor, timeout_s=0.2)
    harness.executor.descriptors.by_name["file_system"] = short
    harness.descriptor = short
    await asyncio.wait_for(harness.executor.on_decision(harness.decision(*WRITE)), 5)
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "tool_timeout") and tool.calls == 1


async def test_shutdown_ends_a_running_write_uncertain_and_a_read_failed(scripted: Any) -> None:
    harness, _ = scripted(_hang)
    runs = [
        asyncio.create_task(harness.executor.on_decision(harness.decision(*WRITE))),
        asyncio.create_task(harness.executor.on_decision(harness.decision(*READ, rid="r2", key="k2"))),
    ]
    await asyncio.sleep(0.05)
    harness.executor.abort()
    assert await asyncio.wait_for(asyncio.gather(*runs), 5) == [Settle.ACK, Settle.ACK]
    assert harness.receipt("r1") == (Outcome.UNCERTAIN, "executor_shutdown")
    assert harness.receipt("r2") == (Outcome.FAILED, "executor_shutdown")


def _listing(count: int) -> Any:
    entries = [{"name": f"{n:06d}" + '"' * 40, "kind": "file", "size_bytes": n} for n in range(count)]
    return lambda arguments: {"path": ".", "entries": entries}


async def test_a_result_too_large_for_the_receipt_is_kept_compressed_and_referenced(scripted: Any) -> None:
    harness, _ = scripted(_listing(400))
    await harness.executor.on_decision(harness.decision("list", {"path": "."}))
    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.result) == (Outcome.SUCCEEDED, None) and issued.result_ref is not None
    data = gzip.decompress(harness.bus.results[issued.result_ref.subject_prefix])
    assert len(data) == issued.result_ref.size_bytes > harness.runner.inline_result_bytes
    assert issued.result_ref.sha256 == "sha256:" + hashlib.sha256(data).hexdigest()
    assert len(json.loads(data)["entries"]) == 400


async def test_a_replay_of_a_large_result_references_the_same_chunks(scripted: Any) -> None:
    harness, tool = scripted(_listing(400))
    await harness.executor.on_decision(harness.decision("list", {"path": "."}))
    await harness.executor.on_decision(harness.decision("list", {"path": "."}, rid="r2"))
    first, replay = harness.bus.receipts["r1"], harness.bus.receipts["r2"]
    assert replay.outcome is Outcome.REPLAYED and replay.result_ref == first.result_ref and tool.calls == 1


@pytest.mark.parametrize(("operation", "outcome", "code"), [("list", "failed", "output_too_large")])
async def test_a_read_result_over_the_limit_fails(scripted: Any, operation: str, outcome: str, code: str) -> None:
    harness, _ = scripted(_listing(5000))
    await harness.executor.on_decision(harness.decision(operation, {"path": "."}))
    assert harness.receipt("r1") == (outcome, code)


async def test_a_write_result_over_the_limit_succeeds_with_the_result_withheld(scripted: Any) -> None:
    big = {"path": "p" * 100_000, "size_bytes": 1, "sha256": "0" * 64, "created": True}
    harness, _ = scripted(lambda arguments: big)
    await harness.executor.on_decision(harness.decision(*WRITE))
    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code, issued.result) == (Outcome.SUCCEEDED, "output_withheld", None)


async def test_a_receipt_carries_its_result_scrubbed_of_credentials(scripted: Any) -> None:
    secret = "AKIA" + "Q" * 16
    content = f"aws_key = {secret}"
    found = {"path": "a.txt", "content": content, "size_bytes": len(content), "sha256": "0" * 64}
    harness, _ = scripted(lambda arguments: found)
    await harness.executor.on_decision(harness.decision(*READ))
    issued = harness.bus.receipts["r1"]
    assert issued.outcome is Outcome.SUCCEEDED and issued.result is not None
    assert secret not in msgspec.json.encode(issued).decode()
    assert issued.result["content"].startswith("aws_key = [redacted:aws_access_key sha256:")
    assert issued.redactions == ("/result/content",)


@pytest.mark.parametrize(("behave", "write", "read"), ENDINGS, ids=ENDING_IDS)
async def test_every_receipt_of_a_run_says_how_long_the_tool_ran(
    scripted: Any, behave: Any, write: str, read: str | None
) -> None:
    for operation, arguments in (WRITE, READ):
        harness, tool = scripted(behave)
        await harness.executor.on_decision(harness.decision(operation, arguments))
        issued = harness.bus.receipts["r1"]
        assert tool.calls == 1 and issued.duration_ms is not None and issued.duration_ms >= 0, issued


@pytest.mark.parametrize(
    ("behave", "operation", "code"),
    [
        (_listing(5000), "list", "output_too_large"),
        (
            lambda arguments: {"path": "p" * 100_000, "size_bytes": 1, "sha256": "0" * 64, "created": True},
            "write",
            "output_withheld",
        ),
        (lambda arguments: {"path": ".", "entries": []}, "list", "ok"),
    ],
    ids=["read-over-the-limit", "write-withheld", "succeeded"],
)
async def test_a_receipt_whose_result_is_not_kept_says_how_long_the_tool_ran(
    scripted: Any, behave: Any, operation: str, code: str
) -> None:
    harness, _ = scripted(behave)
    arguments = {"path": "."} if operation == "list" else dict(WRITE[1])
    await harness.executor.on_decision(harness.decision(operation, arguments))
    issued = harness.bus.receipts["r1"]
    assert issued.duration_ms is not None and issued.duration_ms >= 0, issued
    assert issued.reason_code == code


async def test_a_timed_out_call_says_it_ran_for_its_timeout(scripted: Any) -> None:
    harness, _ = scripted(_hang)
    short = msgspec.structs.replace(harness.descriptor, timeout_s=0.2)
    harness.executor.descriptors.by_name["file_system"] = short
    harness.descriptor = short
    await asyncio.wait_for(harness.executor.on_decision(harness.decision(*WRITE)), 5)
    issued = harness.bus.receipts["r1"]
    assert issued.reason_code == "tool_timeout" and issued.duration_ms is not None and issued.duration_ms >= 200


async def test_a_call_ended_by_shutdown_says_how_long_the_tool_ran(scripted: Any) -> None:
    harness, _ = scripted(_hang)
    run = asyncio.create_task(harness.executor.on_decision(harness.decision(*WRITE)))
    await asyncio.sleep(0.05)
    harness.executor.abort()
    await asyncio.wait_for(run, 5)
    issued = harness.bus.receipts["r1"]
    assert issued.reason_code == "executor_shutdown" and issued.duration_ms is not None and issued.duration_ms >= 40


@pytest.mark.parametrize("member", [5, 2, 9, 7], ids=["tool-error", "timeout", "schema", "refused"])
async def test_the_request_line_of_a_run_gives_the_tool_time(
    scripted: Any, member: int, caplog: pytest.LogCaptureFixture
) -> None:
    harness, _ = scripted(ENDINGS[member][0])
    with caplog.at_level(logging.INFO, logger="effectgate.requests"):
        await harness.executor.on_decision(harness.decision(*WRITE))
    (line,) = [record for record in caplog.records if record.name == "effectgate.requests"]
    assert line.getMessage() == "receipt" and line.outcome != "succeeded"
    assert isinstance(line.tool_ms, float) and line.tool_ms >= 0
