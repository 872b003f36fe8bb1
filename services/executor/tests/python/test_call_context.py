"""A tool host is told who a call runs for from the record, and a target's effect id reaches the receipt."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec

from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.effects.calling import Effected

WRITE = ("write", {"path": "a.txt", "content": "x"})
RESULT = {"path": "a.txt", "size_bytes": 1, "sha256": "0" * 64, "created": True}


async def test_the_context_comes_from_the_signed_decision_the_grant_and_the_executor_s_clock(scripted: Any) -> None:
    harness, tool = scripted(lambda arguments: RESULT)
    decision = msgspec.structs.replace(harness.decision(*WRITE), policy_version="sha256:" + "1" * 64)
    grant = msgspec.structs.replace(harness.grant(decision), approvers=("alice", "bob"))
    await harness.runner.run(decision, harness.descriptor, grant)
    [context] = tool.contexts
    assert context is not None
    assert (context.principal, context.request_id, context.idempotency_key) == ("demo-agent", "r1", "k1")
    assert (context.approval_id, context.approvers) == ("ap-1", ("alice", "bob"))
    assert context.policy_version == "sha256:" + "1" * 64
    assert context.deadline == harness.clock.now + timedelta(seconds=harness.descriptor.timeout_s)
    assert context.traceparent is None  # tracing is off in this process


async def test_a_call_without_an_approval_has_none_in_its_context(scripted: Any) -> None:
    harness, tool = scripted(lambda arguments: RESULT)
    await harness.executor.on_decision(harness.decision(*WRITE))
    [context] = tool.contexts
    assert context is not None and context.approval_id is None and context.approvers == ()


async def test_the_target_s_effect_id_reaches_the_receipt_beside_the_gateway_s_own(scripted: Any) -> None:
    harness, _ = scripted(lambda arguments: Effected(RESULT, "pay_42"))
    await harness.executor.on_decision(harness.decision(*WRITE))
    issued = harness.bus.receipts["r1"]
    assert issued.outcome is Outcome.SUCCEEDED and issued.result == RESULT
    assert issued.target_effect_id == "pay_42" and (issued.effect_id or "").startswith("effect:demo-agent:")
