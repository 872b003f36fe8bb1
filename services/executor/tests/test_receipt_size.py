"""Every request gets exactly one receipt that fits one bus message, whatever grew in it.

The in-memory bus here carries 64 KiB; each way a receipt grows past it — a reason echoing
the call (an error text, an output that fails its schema), a redactions list, an inline
result, a policy's reason — is one member. The receipt is published once, fits, is the one
the index stores, and its whole parts are kept out of band where they can be read back.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from effectgate.contracts.events import ReceiptIssued, ResultRef
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.receipt_detail import REASON_CHARS, ReceiptDetail, with_detail
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.domain import ClaimState
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown
from effectgate.executor.ports import ClaimRequest
from effectgate.executor.receipts.fitting import MIN_LIMIT_BYTES, fit, last_resort, size_bytes

LIMIT = 65_536
CONFIGURED = "Op3rator-Only-Credential"
READ, WRITE, LIST = ("read", {"path": "a.txt"}), ("write", {"path": "a.txt", "content": "x"}), ("list", {"path": "."})
ITEMS = [{"id": f"order-{n:06d}", "qty": n} for n in range(4_000)]
"""An argument set echoed back: about 110 KB of JSON, past the bus's 64 KiB."""


def _raise(error: BaseException) -> Any:
    def behave(arguments: dict[str, Any]) -> Any:
        raise error

    return behave


def _secret_listing(count: int) -> Any:
    entries = [{"name": f"{n}-{CONFIGURED}", "kind": "file", "size_bytes": n} for n in range(count)]
    return lambda arguments: {"path": ".", "entries": entries}


def _fitted(scripted: Any, behave: Any, **runner: Any) -> Any:
    harness, tool = scripted(behave, known_secrets=(CONFIGURED,))
    harness.bus.max_payload = LIMIT
    for name, value in runner.items():
        setattr(harness.runner, name, value)
    return harness, tool


def _detail(harness: Any, ref: ResultRef) -> ReceiptDetail:
    return msgspec.json.decode(gzip.decompress(harness.bus.results[ref.subject_prefix]), type=ReceiptDetail)


async def _stored(harness: Any, decision: Any) -> ReceiptIssued:
    request = ClaimRequest("demo-agent", "k1", decision.request_hash, "probe", "exec-2", "n0", 600)
    claim = await harness.store.claim(request)
    assert claim.state is ClaimState.DONE and claim.receipt
    return msgspec.json.decode(claim.receipt, type=ReceiptIssued)


ECHOED = f"Error: no such orders {msgspec.json.encode(ITEMS).decode()}"


@pytest.mark.parametrize(
    ("behave", "call", "code"),
    [
        (_raise(ToolFailed("tool_error", ECHOED)), WRITE, "tool_error"),
        (_raise(ToolFailed("tool_error", ECHOED)), READ, "tool_error"),
        (_raise(ToolOutcomeUnknown("malformed_reply", ECHOED)), WRITE, "malformed_reply"),
        (
            lambda arguments: {"path": ITEMS, "size_bytes": 1, "sha256": "0" * 64, "created": True},
            WRITE,
            "output_invalid",
        ),
        (lambda arguments: ITEMS, READ, "output_invalid"),
    ],
    ids=["tool-error-write", "tool-error-read", "malformed-reply", "output-invalid-write", "output-invalid-read"],
)
async def test_a_reason_that_echoes_the_call_is_cut_and_kept_whole_out_of_band(
    scripted: Any, behave: Any, call: tuple[str, dict[str, Any]], code: str
) -> None:
    harness, tool = _fitted(scripted, behave)
    decision = harness.decision(*call)
    await harness.executor.on_decision(decision)
    (issued,) = harness.receipts
    assert tool.calls == 1 and issued.reason_code == code and size_bytes(issued) <= harness.bus.receipt_limit_bytes()
    assert issued.detail_ref is not None and len(issued.reason) < REASON_CHARS + 200 and "detail_ref" in issued.reason
    whole = _detail(harness, issued.detail_ref).reason
    assert whole is not None and len(whole) > LIMIT and whole.startswith(issued.reason[:REASON_CHARS])
    assert "order-003999" in whole and issued.duration_ms is not None
    assert await _stored(harness, decision) == issued, "the index keeps the receipt that was published"


async def test_a_redactions_list_too_long_is_kept_whole_and_the_receipt_names_where_they_are(scripted: Any) -> None:
    harness, _ = _fitted(scripted, _secret_listing(4_000), max_result_bytes=64 * 2**20)
    await harness.executor.on_decision(harness.decision(*LIST))
    (issued,) = harness.receipts
    assert issued.outcome is Outcome.SUCCEEDED and issued.result_ref is not None
    assert size_bytes(issued) <= harness.bus.receipt_limit_bytes() and issued.redactions == ("/result",)
    assert issued.detail_ref is not None and issued.reason == "the tool ran"
    whole = _detail(harness, issued.detail_ref).redactions
    assert whole is not None and len(whole) == 4_000 and whole[3_999] == "/result/entries/3999/name"
    assert with_detail(issued, _detail(harness, issued.detail_ref)).redactions == whole


async def test_an_inline_result_over_the_bus_limit_is_kept_out_of_band(scripted: Any) -> None:
    listing = {"path": ".", "entries": [{"name": f"f{n:05d}", "kind": "file", "size_bytes": n} for n in range(3_000)]}
    harness, _ = _fitted(scripted, lambda arguments: listing, inline_result_bytes=2**20, max_result_bytes=2**22)
    await harness.executor.on_decision(harness.decision(*LIST))
    (issued,) = harness.receipts
    assert (issued.outcome, issued.result) == (Outcome.SUCCEEDED, None) and issued.result_ref is not None
    assert size_bytes(issued) <= harness.bus.receipt_limit_bytes() and issued.detail_ref is None
    assert msgspec.json.decode(gzip.decompress(harness.bus.results[issued.result_ref.subject_prefix])) == listing


async def test_a_denial_with_a_reason_too_long_for_the_bus_is_issued_cut(scripted: Any) -> None:
    harness, tool = _fitted(scripted, _raise(AssertionError("nothing runs")))
    decision = harness.decision(*WRITE, verdict=Verdict.DENY)
    long = msgspec.structs.replace(decision, reason=f"arguments invalid at /items: {ECHOED}", signature="")
    harness.bus.decisions["r1"] = signed = sign_event(long, harness.policy_key)
    await harness.executor.on_decision(signed)
    (issued,) = harness.receipts
    assert issued.outcome is Outcome.DENIED and tool.calls == 0 and issued.detail_ref is not None
    assert size_bytes(issued) <= harness.bus.receipt_limit_bytes() and _detail(harness, issued.detail_ref).reason
    assert _detail(harness, issued.detail_ref).reason == long.reason


async def test_a_replay_of_a_cut_receipt_fits_and_points_at_the_same_whole_reason(scripted: Any) -> None:
    harness, tool = _fitted(scripted, _raise(ToolFailed("tool_error", ECHOED)))
    await harness.executor.on_decision(harness.decision(*WRITE))
    await harness.executor.on_decision(harness.decision(*WRITE, rid="r2"))
    first, replay = harness.bus.receipts["r1"], harness.bus.receipts["r2"]
    assert tool.calls == 1 and (replay.outcome, replay.replay_outcome) == (Outcome.REPLAYED, Outcome.FAILED)
    assert (replay.reason, replay.detail_ref) == (first.reason, first.detail_ref) and len(harness.bus.results) == 1


async def test_when_nothing_can_be_kept_out_of_band_the_last_resort_is_still_issued(scripted: Any) -> None:
    harness, _ = _fitted(scripted, _raise(ToolFailed("tool_error", ECHOED)))

    async def unavailable(principal: str, request_id: str, data: bytes) -> ResultRef:
        raise OSError("the results stream is full")

    harness.bus.store_result = unavailable
    await harness.executor.on_decision(harness.decision(*WRITE))
    (issued,) = harness.receipts
    assert issued.outcome is Outcome.FAILED and issued.reason_code == "tool_error" and issued.detail_ref is None
    assert (
        size_bytes(issued) <= harness.bus.receipt_limit_bytes() and "not in it: the rest of its reason" in issued.reason
    )


def _worst(**fields: Any) -> ReceiptIssued:
    """A receipt whose every member is as long as it may enter, in characters JSON escapes six bytes wide."""
    wide = "\x01"
    return ReceiptIssued(
        event_id="receipt:" + "p" * 64 + ":" + "r" * 64,
        occurred_at=datetime.now(UTC),
        request_id="r" * 64,
        principal="p" * 64,
        outcome=Outcome.REPLAYED,
        reason_code=wide * 5_000,
        reason=wide * 500_000,
        tool="t" * 63,
        version="1.0.0-" + "a" * 5_000,
        operation="o" * 128,
        idempotency_key=wide * 255,
        request_hash="sha256:" + "0" * 64,
        result=[wide * 100] * 5_000,
        effect_id="effect:" + "p" * 64 + ":" + "0" * 16,
        replay_of="q" * 64,
        redactions=tuple(f"/result/{n}" for n in range(5_000)),
        replay_outcome=Outcome.UNCERTAIN,
        **fields,
    )


@pytest.mark.parametrize("refs", [0, 1, 2], ids=["no-refs", "result-ref", "both-refs"])
def test_the_last_resort_fits_the_smallest_limit_whatever_the_receipt_held(refs: int) -> None:
    ref = ResultRef(
        subject_prefix="tg.result." + "p" * 64 + "." + "r" * 64 + "_01234567",
        chunks=9,
        size_bytes=2**40,
        stored_bytes=2**40,
        sha256="sha256:" + "0" * 64,
    )
    fields = {"result_ref": ref if refs else None, "detail_ref": ref if refs == 2 else None}
    cut = last_resort(_worst(**fields))
    assert size_bytes(cut) <= MIN_LIMIT_BYTES and cut.result is None and cut.redactions == ("/result",)
    assert (cut.request_id, cut.principal, cut.outcome, cut.result_ref) == (
        "r" * 64,
        "p" * 64,
        Outcome.REPLAYED,
        fields["result_ref"],
    )


async def test_fitting_a_receipt_that_fits_keeps_it_and_stores_nothing() -> None:
    kept: list[bytes] = []

    async def keep(data: bytes) -> ResultRef:
        kept.append(data)
        raise AssertionError("nothing should be kept")

    small = msgspec.structs.replace(_worst(), reason="why", reason_code="ok", result=None, redactions=("/reason",))
    small = msgspec.structs.replace(small, version="1.0.0", idempotency_key="k")
    assert await fit(small, MIN_LIMIT_BYTES, keep) is small and kept == []
