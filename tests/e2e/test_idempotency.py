"""At most once per effect: client retries, duplicate deliveries, replayed decisions (guarantee 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ToolRequested, encode

pytestmark = pytest.mark.e2e

IN_MOVED_TO = 0x80


async def test_same_key_same_arguments_replays_without_running_again(gate: Any, watch: Any, new_id: Any) -> None:
    agent, key, name = gate.agent(2), new_id("k"), new_id("once-") + ".txt"
    target = gate.paths.sandbox / name
    watch.watch(gate.paths.sandbox)
    arguments = {"path": name, "content": "written once"}

    first = await gate.call(agent, "write", arguments, key=key)
    assert (first.outcome, first.result["created"]) == ("succeeded", True), first.reason
    target.unlink()

    second = await gate.call(agent, "write", arguments, key=key)
    await gate.settle()

    assert (second.outcome, second.replay_of) == ("replayed", first.request_id), second.reason
    assert second.result == first.result and second.effect_id == first.effect_id
    assert second.request_id != first.request_id
    assert not target.exists(), "the replay ran the write again"
    assert watch.count(name, IN_MOVED_TO) == 1


async def test_same_key_other_arguments_is_refused(gate: Any, watch: Any, new_id: Any) -> None:
    agent, key, name = gate.agent(2), new_id("k"), new_id("keyed-") + ".txt"
    watch.watch(gate.paths.sandbox)

    first = await gate.call(agent, "write", {"path": name, "content": "first"}, key=key)
    other = await gate.call(agent, "write", {"path": name, "content": "second"}, key=key)
    await gate.settle()

    assert first.outcome == "succeeded"
    assert (other.outcome, other.reason_code) == ("refused", "idempotency_key_reused"), other.reason
    assert (gate.paths.sandbox / name).read_text() == "first"
    assert watch.count(name, IN_MOVED_TO) == 1


def _write_request(request_id: str, name: str) -> ToolRequested:
    return ToolRequested(
        event_id=request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        tool="file_system",
        operation="write",
        arguments={"path": name, "content": "delivered twice"},
        idempotency_key=request_id,
    )


async def test_duplicate_delivery_runs_once_with_one_receipt(gate: Any, watch: Any, new_id: Any) -> None:
    agent, request_id, name = gate.agent(2), new_id("r"), new_id("dup-") + ".txt"
    watch.watch(gate.paths.sandbox)
    body = encode(_write_request(request_id, name))

    await gate.publish_raw(Subjects.request(agent), body, f"dupA-{request_id}")
    await gate.publish_raw(Subjects.request(agent), body, f"dupB-{request_id}")
    issued = await gate.receipt(agent, request_id)
    await gate.settle()

    assert issued.outcome == "succeeded", issued.reason
    assert await gate.count(Subjects.request(agent)) == 2, "the duplicate did not reach the stream"
    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
    assert watch.count(name, IN_MOVED_TO) == 1, "the duplicated request wrote more than once"


async def test_republished_decision_does_not_run_the_tool_again(gate: Any, watch: Any, new_id: Any) -> None:
    agent, name = gate.agent(2), new_id("redecided-") + ".txt"
    target = gate.paths.sandbox / name
    watch.watch(gate.paths.sandbox)
    first = await gate.call(agent, "write", {"path": name, "content": "decided once"})
    assert first.outcome == "succeeded"
    target.unlink()

    decision_subject = Subjects.decision(agent, first.request_id)
    stored = await gate.js.get_last_msg(catalog.STREAM, decision_subject)
    await gate.publish_raw(decision_subject, stored.data, new_id("again-"))
    await gate.settle()

    assert await gate.count(decision_subject) == 2, "the copied decision did not reach the stream"
    assert not target.exists(), "a re-delivered decision ran the write again"
    assert watch.count(name, IN_MOVED_TO) == 1
    assert await gate.count(Subjects.receipt(agent, first.request_id)) == 1
