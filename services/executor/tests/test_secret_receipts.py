"""No receipt path lets a secret out: what the index stores and what the stream gets are both sealed.

An executor over in-memory ports whose tool answers with text carrying a DSN, a token and
an operator-configured value; every way a run ends is checked in the published receipt and
in the receipt the idempotency index keeps for replays.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.domain import ClaimState
from effectgate.executor.errors import ToolFailed, ToolOutcomeUnknown, ToolRefused
from effectgate.executor.ports import ClaimRequest

CONFIGURED = "Op3rator-Only-Credential"
SECRETS = ("hunter2", "Ab12Cd34Ef56Gh78", CONFIGURED)
TEXT = f"connect postgres://admin:hunter2@db/x failed; token=Ab12Cd34Ef56Gh78 (as {CONFIGURED})"
READ, WRITE = ("read", {"path": "a.txt"}), ("write", {"path": "a.txt", "content": "x"})


def _raise(error: BaseException) -> Callable[[dict[str, Any]], Any]:
    def behave(arguments: dict[str, Any]) -> Any:
        raise error

    return behave


def _found(**result: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda arguments: {"path": "a.txt", "size_bytes": 1, "sha256": "0" * 64, **result}


async def _stored(harness: Any, decision: Any) -> bytes:
    """The receipt bytes the index keeps for ``decision``'s key (read back as another request's claim)."""
    request = ClaimRequest("demo-agent", "k1", decision.request_hash, "probe", "exec-2", "n0", 600)
    claim = await harness.store.claim(request)
    assert claim.state is ClaimState.DONE and claim.receipt, claim
    return bytes(claim.receipt)


def _assert_clean(data: bytes) -> None:
    text = data.decode()
    assert not [secret for secret in SECRETS if secret in text], text


@pytest.mark.parametrize(
    ("behave", "call", "outcome"),
    [
        (_raise(ToolFailed("tool_error", TEXT)), READ, Outcome.FAILED),
        (_raise(ToolFailed("server_unavailable", TEXT)), WRITE, Outcome.FAILED),
        (_raise(ToolOutcomeUnknown("connection_lost", TEXT)), WRITE, Outcome.UNCERTAIN),
        (_raise(ToolOutcomeUnknown("malformed_reply", TEXT)), READ, Outcome.FAILED),
        (_raise(ToolRefused("tool_definition_changed", TEXT)), WRITE, Outcome.REFUSED),
    ],
    ids=["failed-read", "unavailable-write", "uncertain-write", "malformed-read", "refused"],
)
async def test_a_tools_error_text_leaves_only_scrubbed_and_named(
    scripted: Any, behave: Any, call: Any, outcome: Outcome
) -> None:
    harness, _ = scripted(behave, known_secrets=(CONFIGURED,))

    decision = harness.decision(*call)
    await harness.executor.on_decision(decision)

    issued = harness.bus.receipts["r1"]
    assert issued.outcome is outcome
    assert issued.redactions == ("/reason",)
    assert "postgres://admin:[redacted:url_password sha256:" in issued.reason
    assert "[redacted:configured sha256:" in issued.reason
    _assert_clean(msgspec.json.encode(issued))
    if outcome is not Outcome.REFUSED:  # a refusal before any effect frees the key: nothing is stored
        _assert_clean(await _stored(harness, decision))


async def test_a_result_and_its_replay_carry_the_scrubbed_result_and_its_pointers(scripted: Any) -> None:
    harness, tool = scripted(_found(content=TEXT), known_secrets=(CONFIGURED,))

    decision = harness.decision(*READ)
    await harness.executor.on_decision(decision)
    await harness.executor.on_decision(harness.decision(*READ, rid="r2"))

    first, replay = harness.bus.receipts["r1"], harness.bus.receipts["r2"]
    assert tool.calls == 1 and replay.outcome is Outcome.REPLAYED
    assert first.redactions == replay.redactions == ("/result/content",)
    assert replay.result == first.result
    for issued in (first, replay):
        _assert_clean(msgspec.json.encode(issued))
    _assert_clean(await _stored(harness, decision))


async def test_a_result_kept_out_of_band_is_scrubbed_before_it_is_stored(scripted: Any) -> None:
    harness, _ = scripted(_found(content=TEXT + " " + "x" * 4000), known_secrets=(CONFIGURED,))

    await harness.executor.on_decision(harness.decision(*READ))

    issued = harness.bus.receipts["r1"]
    assert issued.result_ref is not None and issued.redactions == ("/result/content",)
    assert harness.bus.results, "the result was not kept out of band"
    for packed in harness.bus.results.values():
        _assert_clean(gzip.decompress(packed))


@pytest.mark.parametrize("verdict", [Verdict.DENY, Verdict.REFUSE])
async def test_a_decided_refusal_whose_reason_holds_a_secret_is_scrubbed(scripted: Any, verdict: Verdict) -> None:
    harness, tool = scripted(_found(content="ok"), known_secrets=(CONFIGURED,))
    decision = msgspec.structs.replace(harness.decision(*WRITE, verdict=verdict), reason=TEXT, signature=None)

    await harness.executor.on_decision(sign_event(decision, harness.policy_key))

    issued = harness.bus.receipts["r1"]
    assert tool.calls == 0 and issued.redactions == ("/reason",)
    _assert_clean(msgspec.json.encode(issued))
