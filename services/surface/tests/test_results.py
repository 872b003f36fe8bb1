"""Receipts as MCP results."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.replays import resolved_as
from effectgate.contracts.vocabulary import Outcome
from effectgate.surface.results import as_result, pending_result


def receipt(outcome: Outcome, reason_code: str = "ok", result: Any = None, **more: Any) -> ReceiptIssued:
    return ReceiptIssued(
        event_id="e",
        occurred_at=datetime.now(UTC),
        request_id="r1",
        principal="p",
        outcome=outcome,
        reason_code=reason_code,
        reason="because",
        result=result,
        **more,
    )


def test_a_success_carries_content_and_structured_content_and_the_receipt() -> None:
    result = as_result(receipt(Outcome.SUCCEEDED, result={"a": 1}), False, True, 1000)
    assert result.is_error is False and result.structured_content == {"a": 1}
    assert json.loads(result.content[0].text) == {"a": 1}  # type: ignore[union-attr]
    assert result.meta and result.meta["io.effectgate/receipt"]["request_id"] == "r1"


def test_an_mcp_upstreams_blocks_pass_through() -> None:
    envelope = {"structured": None, "content": [{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "x"}]}
    result = as_result(receipt(Outcome.SUCCEEDED, result=envelope), True, False, 1000)
    assert [block.type for block in result.content] == ["text", "text"]
    assert result.content[0].text == "hi"  # type: ignore[union-attr]
    assert "image block x" in result.content[1].text  # type: ignore[union-attr]
    assert result.structured_content is None


@pytest.mark.parametrize(
    ("outcome", "code", "advice"),
    [
        (Outcome.DENIED, "forbidden", "Do not retry this call unchanged"),
        (Outcome.REFUSED, "schema_invalid", "fix what the reason names"),
        (Outcome.FAILED, "tool_error", "Calling again is a new call"),
        (Outcome.UNCERTAIN, "timeout", "MAY HAVE HAPPENED"),
    ],
)
def test_every_other_outcome_is_an_error_result_that_says_what_to_do(outcome: Outcome, code: str, advice: str) -> None:
    result = as_result(receipt(outcome, code), False, True, 1000)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and text.startswith(f"effectgate: {outcome.value} ({code})") and advice in text


def test_a_rate_limited_denial_says_when_to_come_back() -> None:
    result = as_result(receipt(Outcome.DENIED, "rate_limited", retry_after_s=12.0), False, True, 1000)
    assert "fits again in 12 s" in result.content[0].text  # type: ignore[union-attr]


def test_a_result_over_the_limit_is_cut_with_a_marker_naming_the_request() -> None:
    result = as_result(receipt(Outcome.SUCCEEDED, result={"a": "é" * 5000}), False, False, 1024)
    text = result.content[0].text  # type: ignore[union-attr]
    assert "result cut at 1024 of" in text and '"request_id": "r1"' in text and len(text.encode()) < 1400
    assert result.structured_content is None and result.is_error is False


def test_a_pending_call_names_its_approval_and_how_to_get_the_outcome() -> None:
    result = pending_result("r1", "ap-0123456789ab", None)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and "pending approval ap-0123456789ab" in text and "same arguments" in text


def test_a_cut_never_splits_a_character_and_names_the_offset_it_cut_at() -> None:
    result = as_result(receipt(Outcome.SUCCEEDED, result={"a": "é" * 5000}), False, False, 1001)
    text = result.content[0].text  # type: ignore[union-attr]
    head, _, marker = text.partition("\n[effectgate: result cut at ")
    cut = int(marker.split(" ")[0])
    assert cut <= 1001 and len(head.encode()) == cut and '"offset_bytes": ' + str(cut) in marker


@pytest.mark.parametrize(
    ("stored", "code", "reason", "advice"),
    [
        (Outcome.FAILED, "tool_error", "Error: order not found", "not run again"),
        (Outcome.DENIED, "approval_expired", "the approval expired before use", "Do not retry this call unchanged"),
        (Outcome.REFUSED, "path_outside_sandbox", "'../x' is outside the sandbox", "fix what the reason names"),
        (Outcome.UNCERTAIN, "tool_timeout", "no answer in 30s; reconcile it", "resolve request r0"),
    ],
)
def test_a_replayed_failure_reads_as_that_failure_with_its_reason_marked_as_a_replay(
    stored: Outcome, code: str, reason: str, advice: str
) -> None:
    replay = msgspec.structs.replace(
        receipt(Outcome.REPLAYED, code), reason=reason, replay_of="r0", replay_outcome=stored
    )
    result = as_result(replay, False, True, 1000)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and text.startswith(f"effectgate: replayed {stored.value} ({code}): {reason}\n")
    assert "replay of request r0" in text and "did not run again" in text and advice in text
    assert result.meta and result.meta["io.effectgate/receipt"]["replay_outcome"] == stored.value


def test_a_replayed_success_is_a_success_with_its_result() -> None:
    replay = receipt(Outcome.REPLAYED, result={"a": 1}, replay_of="r0", replay_outcome=Outcome.SUCCEEDED)
    result = as_result(replay, False, True, 1000)
    assert result.is_error is False and result.structured_content == {"a": 1}
    assert result.meta and result.meta["io.effectgate/receipt"]["replay_of"] == "r0"


def test_a_reason_longer_than_the_limit_is_cut_whole_characters() -> None:
    long = msgspec.structs.replace(receipt(Outcome.FAILED, "output_invalid"), reason="é" * 100_000)
    text = as_result(long, False, True, 1001).content[0].text  # type: ignore[union-attr]
    assert "reason cut at 1001 bytes" in text and len(text.encode()) < 1400


@pytest.mark.parametrize(
    ("resolution", "said"),
    [
        ("ran", "It was resolved since: the effect happened (resolution rsl_1)."),
        ("not_run", "It was resolved since: the effect did not happen (resolution rsl_1)."),
        ("unknown", "It is not resolved: whether the effect happened is still unknown"),
    ],
)
def test_a_replayed_uncertain_call_says_its_resolution(resolution: str, said: str) -> None:
    replay = receipt(
        Outcome.REPLAYED,
        "tool_timeout",
        replay_of="r0",
        replay_outcome=Outcome.UNCERTAIN,
        resolution=resolution,
        resolution_id="rsl_1",
    )
    result = as_result(replay, False, True, 1000)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and said in text and "MAY HAVE HAPPENED" in text
    assert result.meta and result.meta["io.effectgate/receipt"]["resolution"] == resolution
    assert resolved_as(replay) == resolution and resolved_as(receipt(Outcome.FAILED, resolution="ran")) is None
