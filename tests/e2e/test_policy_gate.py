"""Default deny, schema refusals and the rate limit, against the running system (guarantees 1 and 8)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from effectgate.contracts.bus.catalog import Subjects
from effectgate.shared.stores.idempotency import record_key

pytestmark = pytest.mark.e2e


async def test_unknown_tool_is_denied(gate: Any, new_id: Any) -> None:
    agent = gate.agent()
    issued = await gate.call(agent, "read", {"path": "hello.txt"}, tool=new_id("no_such_tool_"))

    assert (issued.outcome, issued.reason_code) == ("denied", "unknown_tool")
    assert issued.result is None and issued.effect_id is None


async def test_unknown_principal_is_denied_and_nothing_runs(gate: Any, watch: Any, new_id: Any) -> None:
    watch.watch(gate.paths.sandbox)
    key = new_id("k")
    issued = await gate.call("nobody", "read", {"path": "hello.txt"}, key=key)
    await gate.settle()

    assert (issued.outcome, issued.reason_code) == ("denied", "unknown_principal")
    assert issued.principal == "nobody" and issued.result is None
    assert watch.poll() == [], "the executor touched the sandbox for an unknown principal"
    assert await gate.count(Subjects.receipts_of("nobody")) == 1


async def test_unknown_operation_is_denied(gate: Any) -> None:
    issued = await gate.call(gate.agent(), "delete", {"path": "hello.txt"})

    assert (issued.outcome, issued.reason_code) == ("denied", "unknown_operation")
    assert "delete" in issued.reason


@pytest.mark.parametrize(
    ("operation", "arguments", "named"),
    [
        ("read", {"path": 5}, "/path"),
        ("read", {"path": "hello.txt", "mode": "rb"}, "mode"),
        ("write", {"path": "x.txt"}, "content"),
        ("read", {"path": ""}, "/path"),
    ],
)
async def test_schema_invalid_arguments_are_refused_naming_the_path(
    gate: Any, operation: str, arguments: dict[str, Any], named: str
) -> None:
    issued = await gate.call(gate.agent(2), operation, arguments)

    assert (issued.outcome, issued.reason_code) == ("refused", "schema_invalid")
    assert named in issued.reason, issued.reason
    assert not (gate.paths.sandbox / "x.txt").exists()


async def test_denials_do_not_consume_the_rate_limit(gate: Any, new_id: Any) -> None:
    agent = gate.agent()
    denials = [
        ("read", {"path": 7}, "schema_invalid"),
        ("read", {"path": "hello.txt", "extra": True}, "schema_invalid"),
        ("chmod", {"path": "hello.txt"}, "unknown_operation"),
    ]
    for operation, arguments, code in denials * 5:
        issued = await gate.call(agent, operation, arguments)
        assert issued.reason_code == code and issued.outcome in ("denied", "refused")

    reads = [await gate.call(agent, "read", {"path": "hello.txt"}) for _ in range(5)]
    assert [r.outcome for r in reads] == ["succeeded"] * 5
    assert reads[0].result["content"] == "hello from the sandbox\n"

    sixth = await gate.call(agent, "read", {"path": "hello.txt"})
    assert (sixth.outcome, sixth.reason_code) == ("denied", "rate_limited")
    assert sixth.result is None


async def test_rate_limited_call_leaves_no_idempotency_record(gate: Any, new_id: Any) -> None:
    """A denied call never reaches the executor: its key is never claimed."""
    agent = gate.agent()
    for _ in range(5):
        assert (await gate.call(agent, "read", {"path": "hello.txt"})).outcome == "succeeded"
    key = new_id("k")
    issued = await gate.call(agent, "read", {"path": "hello.txt"}, key=key)
    assert issued.reason_code == "rate_limited"

    client = aioredis.Redis.from_url(gate.stack.redis_url)
    try:
        assert await client.exists(record_key(agent, key)) == 0
    finally:
        await client.aclose()
