"""A streaming call's progress reaches its agent on ``tg.progress.<principal>.<request_id>`` while it runs."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from nats.aio.client import Client

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.tools.hosting import CallProgress, WorkerAnswer, WorkerCall, WorkerSubjects
from effectgate.contracts.vocabulary import Outcome

from .conftest import Responder, bank

pytestmark = pytest.mark.connected


async def streaming(call: WorkerCall, responder: Responder) -> WorkerAnswer:
    for items in (1, 2, 3):
        await responder.progress(call, items)
        await asyncio.sleep(0.15)
    return WorkerAnswer(call_id=call.call_id, outcome="ok", result=["a", "b", "c"])


async def test_each_progress_of_a_streaming_call_is_relayed_to_its_agent(
    nc: Client, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    relayed: list[CallProgress] = []

    async def heard(msg: Any) -> None:
        relayed.append(msgspec.json.decode(msg.data, type=CallProgress))

    subscription = await nc.subscribe(Subjects.progress("demo-agent", "r1"), cb=heard)
    worker_ = await responder(streaming)
    harness = harness_of(bank(worker), tools)
    await asyncio.wait_for(harness.executor.on_decision(harness.decision("export", {"account": "a"})), 10)
    await subscription.unsubscribe()
    issued = harness.bus.receipts["r1"]
    assert (issued.outcome, issued.result) == (Outcome.SUCCEEDED, ["a", "b", "c"])
    [call] = worker_.calls
    assert call.progress == WorkerSubjects.progress(worker, call.call_id)
    assert [(p.request_id, p.items) for p in relayed] == [("r1", 1), ("r1", 2), ("r1", 3)]


async def test_a_call_that_does_not_stream_is_given_no_progress_subject(
    harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    async def answer(call: WorkerCall, responder: Responder) -> WorkerAnswer:
        return WorkerAnswer(call_id=call.call_id, outcome="ok", result={})

    worker_ = await responder(answer)
    harness = harness_of(bank(worker), tools)
    await harness.executor.on_decision(harness.decision("lookup", {"account": "a"}))
    assert [call.progress for call in worker_.calls] == [None]
