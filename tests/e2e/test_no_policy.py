"""A system started without its policy file denies every call and runs nothing (guarantee 1)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack_policy_required() -> bool:
    return False  # this stack runs without a policy on purpose


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any) -> dict[str, str]:
    missing = e2e_paths.state.parent / "no-such-policy.cedar"
    return {"EFFECTGATE_POLICY_POLICY_FILE": str(missing)}


@pytest.mark.parametrize(
    ("autonomy", "operation", "arguments"),
    [
        (1, "read", {"path": "hello.txt"}),
        (1, "list", {"path": "."}),
        (2, "write", {"path": "hello.txt", "content": "overwritten"}),
        (2, "write", {"path": "new-file.txt", "content": "created"}),
        (1, "write", {"path": "needs-approval.txt", "content": "x"}),
    ],
)
async def test_every_call_is_denied_without_a_policy(
    gate: Any, watch: Any, autonomy: int, operation: str, arguments: dict[str, Any]
) -> None:
    sandbox = gate.paths.sandbox
    before = (sandbox / "hello.txt").read_bytes()
    watch.watch(sandbox)

    issued = await gate.call(gate.agent(autonomy), operation, arguments)
    await gate.settle()

    assert (issued.outcome, issued.reason_code) == ("denied", "no_policy"), issued.reason
    assert issued.result is None and issued.effect_id is None
    assert watch.poll() == [], "the sandbox was opened or written although no policy is loaded"
    assert (sandbox / "hello.txt").read_bytes() == before
    assert not (sandbox / "new-file.txt").exists()
    assert not (sandbox / "needs-approval.txt").exists()


async def test_no_approval_is_opened_without_a_policy(gate: Any) -> None:
    agent = gate.agent()
    issued = await gate.call(agent, "write", {"path": "approve-me.txt", "content": "x"})
    await gate.settle()

    assert issued.reason_code == "no_policy"
    assert not await gate.is_pending(issued.request_id)
