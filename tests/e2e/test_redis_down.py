"""Redis unreachable: every call ends denied with a reason, nothing runs (guarantee 1, fail closed)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Subjects

pytestmark = [pytest.mark.e2e, pytest.mark.fault]


@pytest.fixture(scope="module")
def stack_redis_url() -> str:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.mark.parametrize(
    ("autonomy", "operation", "arguments"),
    [
        (1, "read", {"path": "hello.txt"}),
        (2, "write", {"path": "while-redis-is-down.txt", "content": "x"}),
        (1, "write", {"path": "approval-while-redis-is-down.txt", "content": "x"}),
    ],
)
async def test_calls_are_denied_when_redis_is_unreachable(
    gate: Any, watch: Any, autonomy: int, operation: str, arguments: dict[str, Any]
) -> None:
    watch.watch(gate.paths.sandbox)

    issued = await gate.call(gate.agent(autonomy), operation, arguments)
    await gate.settle()

    assert issued.outcome == "denied", (issued.outcome, issued.reason_code, issued.reason)
    assert issued.reason_code in ("idempotency_store_unavailable", "rate_limiter_unavailable"), issued.reason_code
    assert "store" in issued.reason and "fail closed" in issued.reason, issued.reason
    assert "127.0.0.1" not in issued.reason and "Error" not in issued.reason, "the receipt leaks internal topology"
    assert issued.result is None and issued.effect_id is None
    assert watch.poll() == [], "the sandbox was touched while Redis was unreachable"
    if operation == "write":
        assert not (gate.paths.sandbox / arguments["path"]).exists()
        requested = Subjects.approval("requested", issued.principal, issued.request_id)
        assert await gate.count(requested) == 0
