"""Calls of an operation that is not concurrency-safe run one after the other, on a real Redis; none unlocked."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
import redis.asyncio as aioredis
from nats.aio.client import Client

from effectgate.contracts.tools.hosting import CallContext, WorkerAnswer, WorkerCall
from effectgate.devstack.starting import free_port
from effectgate.executor.adapters.python.host import PythonToolHost
from effectgate.executor.adapters.python.serial import Serializer
from effectgate.executor.effects.calling import call_context
from effectgate.executor.errors import ToolRefused

from .conftest import EXECUTOR, Responder, bank

pytestmark = pytest.mark.connected


async def slow(call: WorkerCall, responder: Responder) -> WorkerAnswer:
    await asyncio.sleep(0.3)
    return WorkerAnswer(call_id=call.call_id, outcome="ok", result={})


def _context(harness: Any, rid: str) -> CallContext:
    decision = harness.decision("transfer", {"account": "a"}, rid=rid, key=rid)
    return call_context(decision, None, datetime.now(UTC), 2.0)


async def _both(host: PythonToolHost, harness: Any, worker: str, operation: str, accounts: tuple[str, str]) -> None:
    calls = [
        host.call(worker, bank(worker), operation, {"account": account}, _context(harness, f"r{n}"))
        for n, account in enumerate(accounts)
    ]
    await asyncio.gather(*calls)


def _overlap(spans: list[tuple[float, float]]) -> bool:
    (a_start, a_end), (b_start, b_end) = sorted(spans)
    return b_start < a_end


async def test_calls_on_one_account_run_one_after_the_other(
    python_host: PythonToolHost, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(slow)
    await _both(python_host, harness_of(bank(worker), tools), worker, "transfer", ("a", "a"))
    assert len(worker_.spans) == 2 and not _overlap(worker_.spans)


async def test_calls_on_other_accounts_may_overlap(
    python_host: PythonToolHost, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(slow)
    await _both(python_host, harness_of(bank(worker), tools), worker, "transfer", ("a", "b"))
    assert len(worker_.spans) == 2 and _overlap(worker_.spans)


async def test_without_serialize_by_every_call_of_the_tool_waits_its_turn(
    python_host: PythonToolHost, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(slow)
    await _both(python_host, harness_of(bank(worker), tools), worker, "close_books", ("a", "b"))
    assert len(worker_.spans) == 2 and not _overlap(worker_.spans)


async def test_with_redis_unreachable_a_serialized_call_is_refused_and_nothing_runs(
    nc: Client, harness_of: Any, tools: Any, worker: str, responder: Any
) -> None:
    worker_ = await responder(slow)
    gone = aioredis.Redis(port=free_port(), socket_connect_timeout=0.5, socket_timeout=0.5)
    host = PythonToolHost(nc, EXECUTOR, Serializer(gone))
    context = _context(harness_of(bank(worker), tools), "r1")
    with pytest.raises(ToolRefused) as refused:
        await host.call(worker, bank(worker), "transfer", {"account": "a"}, context)
    assert refused.value.reason_code == "serialization_unavailable" and worker_.calls == []
    await gone.aclose()
