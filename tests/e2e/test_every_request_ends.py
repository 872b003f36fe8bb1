"""Every request ends in exactly one receipt, whatever breaks on its way (guarantee 2).

This module's stack injects faults into single requests (``EFFECTGATE_FAILPOINTS``): a
policy handler that raises or hangs, an executor handler that hangs, by request id
prefix. Its backstop acts after seconds, not minutes, so the tests see it do so.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Rpc, Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

FAULTS = "policy.decide=raise@fpraise-;policy.decide=hang@fphangp-;executor.decision=hang@fphangx-"


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    return {
        "EFFECTGATE_FAILPOINTS": FAULTS,
        "EFFECTGATE_EXECUTOR_BACKSTOP_UNDECIDED_S": "6",
        "EFFECTGATE_EXECUTOR_BACKSTOP_MARGIN_S": "3",
        "EFFECTGATE_EXECUTOR_STALE_GRACE_S": "2",
        "EFFECTGATE_EXECUTOR_MAX_RESULT_BYTES": "3000000",
    }


def _body(request_id: str, operation: str, arguments: Any, key: str | None = None) -> bytes:
    return json.dumps(
        {
            "type": "tool.requested",
            "event_id": request_id,
            "occurred_at": datetime.now(UTC).isoformat(),
            "request_id": request_id,
            "tool": "file_system",
            "operation": operation,
            "arguments": arguments,
            "idempotency_key": key or request_id,
        }
    ).encode()


async def _bystanders(gate: Any, count: int = 4) -> list[Any]:
    return await asyncio.gather(*(gate.call(gate.agent(), "read", {"path": "hello.txt"}) for _ in range(count)))


@pytest.mark.parametrize(
    ("prefix", "operation", "expected"),
    [
        ("fpraise-", "read", {"not_decided", "policy_fault"}),
        ("fphangp-", "read", {"not_decided", "policy_fault"}),
        ("fphangx-", "write", {"not_executed"}),
    ],
    ids=["policy-raises", "policy-hangs", "executor-hangs"],
)
async def test_a_handler_fault_on_one_request_still_ends_it_once_and_nobody_else_notices(
    gate: Any, watch: Any, new_id: Any, prefix: str, operation: str, expected: set[str]
) -> None:
    watch.watch(gate.paths.sandbox)
    agent, request_id, name = gate.agent(2), new_id(prefix), new_id("fault-") + ".txt"
    arguments = {"path": name, "content": "x"} if operation == "write" else {"path": "hello.txt"}
    await gate.publish_raw(Subjects.request(agent), _body(request_id, operation, arguments), request_id)

    bystanders = await _bystanders(gate)
    assert [issued.outcome for issued in bystanders] == ["succeeded"] * len(bystanders)

    issued = await gate.receipt(agent, request_id, timeout_s=90)
    assert issued.reason_code in expected, (issued.outcome, issued.reason_code, issued.reason)
    assert issued.outcome in ("failed", "denied") and issued.result is None
    await asyncio.sleep(3)
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
    assert not (gate.paths.sandbox / name).exists() and watch.count(name, 0xFFF) == 0
    assert [r["event_type"] for r in await gate.trail(request_id)][-1] == "receipt.issued"


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"path": 9007199254740993}, "/arguments/path"),
        ({"path": "a", "extra": [0, -(2**64)]}, "/arguments/extra/1"),
        ({"path": _nested(80)}, "/arguments/path/n/n"),
        ({"path": "a", "deep": {"x": {"y": 10**40}}}, "/arguments/deep/x/y"),
    ],
    ids=["big-int", "negative-in-array", "too-deep", "nested-object"],
)
async def test_a_value_no_hash_can_carry_ends_refused_naming_its_path(
    gate: Any, new_id: Any, arguments: Any, pointer: str
) -> None:
    agent, request_id = gate.agent(), new_id("unrep-")
    await gate.publish_raw(Subjects.request(agent), _body(request_id, "read", arguments), request_id)
    issued = await gate.receipt(agent, request_id, timeout_s=30)
    assert (issued.outcome, issued.reason_code) == ("refused", "unrepresentable_value"), issued.reason
    assert pointer in issued.reason
    await _audited_through(gate, Subjects.receipt(agent, request_id))
    assert [r["event_type"] for r in await gate.trail(request_id)] == [
        "tool.requested",
        "decision.made",
        "receipt.issued",
    ]


async def _audited_through(gate: Any, subject: str, timeout_s: float = 20.0) -> None:
    """Wait until the audit chain holds the message on ``subject`` and verifies intact.

    (``gate.settle`` cannot be used here: this module's hung handlers stay in flight.)
    """
    seq = (await gate.js.get_last_msg("EFFECTGATE", subject)).seq
    for _ in range(int(timeout_s * 10)):
        verified = await gate.rpc(Rpc.AUDIT_VERIFY, {})
        if verified["audited_last_seq"] >= seq:
            assert verified["ok"], verified
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"audit did not reach stream sequence {seq}")


async def test_a_result_larger_than_a_message_arrives_whole_and_replays_whole(gate: Any, new_id: Any) -> None:
    name = new_id("quotes-") + ".txt"
    content = '"' * 600_000  # 1.2 MB once escaped in JSON: over the 1 MiB message limit
    (gate.paths.sandbox / name).write_text(content)
    agent, key = gate.agent(), new_id("k")

    first = await gate.call(agent, "read", {"path": name}, key=key)
    assert first.outcome == "succeeded", first.reason
    assert first.result_ref is not None and first.result["content"] == content
    stored = await gate.js.get_last_msg("EFFECTGATE", Subjects.receipt(agent, first.request_id))
    assert len(stored.data) < 64 * 1024, "the receipt on the bus carries the result itself"

    again = await gate.call(agent, "read", {"path": name}, key=key)
    assert (again.outcome, again.replay_of) == ("replayed", first.request_id)
    assert again.result["content"] == content


async def test_a_result_over_the_kept_limit_fails_with_a_reason(gate: Any, new_id: Any) -> None:
    name = new_id("controls-") + ".txt"
    (gate.paths.sandbox / name).write_text("\x01" * 1_000_000)  # 6 MB of JSON escapes, over this stack's 3 MB
    issued = await gate.call(gate.agent(), "read", {"path": name})
    assert (issued.outcome, issued.reason_code) == ("failed", "output_too_large"), issued.reason
    assert "3000000" in issued.reason and issued.result is None and issued.result_ref is None
