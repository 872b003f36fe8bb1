"""The worker's bus edge on a real nats-server: verified calls answered, anything else refused unrun."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import nats
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from worker_calls import NAME, WAIT_S, ask, call, signed
from worker_held_tools import TOOLS, Held

from effectgate.contracts.tools.hosting import WorkerAlive, WorkerProgress
from effectgate.contracts.tools.hosting import WorkerSubjects as S
from effectgate.devstack.servers import ServerProcess
from effectgate.tools.serving import Worker

pytestmark = pytest.mark.connected

WorkerOf = Callable[..., Awaitable[Worker]]


@pytest.fixture
async def worker_of(server: ServerProcess, executor_key: Ed25519PrivateKey) -> AsyncIterator[WorkerOf]:
    """Starts workers on connections of their own; each is stopped (and its connection closed) at the end."""
    started: list[tuple[Worker, Client]] = []

    async def start(answering: Held, **options: Any) -> Worker:
        connection = await nats.connect(server.url)
        worker = Worker(connection, answering, NAME, executor_key.public_key(), **options)
        await worker.start()
        started.append((worker, connection))
        return worker

    yield start
    for worker, connection in started:
        await worker.stop(grace_s=0.1)
        await connection.close()


async def test_a_signed_call_is_answered_with_its_result_by_this_instance(
    nc: Client, worker_of: WorkerOf, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    worker = await worker_of(held)
    answer = await ask(nc, signed(call(arguments={"n": 7}), executor_key))
    assert (answer.outcome, answer.result, answer.effect_id) == ("ok", {"n": 7}, "fx-c1")
    assert (answer.worker, answer.instance) == (NAME, worker.instance)
    assert [one.call_id for one in held.calls] == ["c1"]


async def test_a_streaming_call_s_progress_reaches_its_progress_subject(
    nc: Client, worker_of: WorkerOf, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    await worker_of(held)
    progress = await nc.subscribe(S.progress(NAME, "c1"))
    asking = asyncio.create_task(ask(nc, signed(call("held", progress=S.progress(NAME, "c1")), executor_key), "held"))
    said = msgspec.json.decode((await progress.next_msg(timeout=WAIT_S)).data, type=WorkerProgress)
    assert (said.call_id, said.items, said.message) == ("c1", 1, "started")
    held.release()
    assert (await asking).outcome == "ok"


@pytest.mark.parametrize("forgery", ["unsigned", "other-key", "altered"])
async def test_a_call_not_signed_by_the_executor_is_refused_and_nothing_runs(
    nc: Client, worker_of: WorkerOf, held: Held, executor_key: Ed25519PrivateKey, forgery: str
) -> None:
    await worker_of(held)
    data = {
        "unsigned": msgspec.json.encode(call()),
        "other-key": signed(call(), Ed25519PrivateKey.generate()),
        "altered": signed(call(), executor_key).replace(b'"n":1', b'"n":2'),
    }[forgery]
    answer = await ask(nc, data)
    assert (answer.call_id, answer.outcome, answer.reason_code) == ("c1", "refused", "unsigned_call")
    assert held.calls == []


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"not json", "malformed_call"),
        (b'{"call_id": "c9"}', "malformed_call"),
        (b"[" * 1900 + b"]" * 1900, "malformed_call"),
        (b'{"call_id": "c9", "pad": "' + b"x" * 5000 + b'"}', "call_too_large"),
    ],
    ids=["not-json", "missing-fields", "nested-deep", "oversized"],
)
async def test_a_malformed_or_oversized_call_is_refused_naming_what_was_wrong(
    nc: Client, worker_of: WorkerOf, held: Held, data: bytes, code: str
) -> None:
    await worker_of(held, max_call_bytes=4096)
    answer = await ask(nc, data)
    assert (answer.outcome, answer.reason_code) == ("refused", code)
    assert answer.reason and held.calls == []
    assert answer.call_id == ("c9" if data.startswith(b'{"call_id": "c9"}') else "")


async def test_a_call_on_another_tool_s_subject_is_refused_unrun(
    nc: Client, worker_of: WorkerOf, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    await worker_of(held)
    answer = await ask(nc, signed(call("echo"), executor_key), tool="held")
    assert (answer.outcome, answer.reason_code) == ("refused", "tool_mismatch")
    assert held.calls == []


async def test_announcements_carry_the_served_tools_and_the_instance(
    nc: Client, worker_of: WorkerOf, held: Held
) -> None:
    alive = await nc.subscribe(S.alive(NAME))
    worker = await worker_of(held, alive_interval_s=0.2)
    first, second = [msgspec.json.decode((await alive.next_msg(timeout=WAIT_S)).data, type=WorkerAlive) for _ in "12"]
    for said in (first, second):
        assert (said.worker, said.instance, said.tools, said.stopping) == (NAME, worker.instance, TOOLS, False)
    assert second.at >= first.at and second.at.tzinfo is not None


async def test_a_graceful_stop_announces_stopping_takes_no_more_calls_and_lets_the_running_call_finish(
    nc: Client, server: ServerProcess, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    connection = await nats.connect(server.url)
    worker = Worker(connection, held, NAME, executor_key.public_key())
    await worker.start()
    alive, progress = await nc.subscribe(S.alive(NAME)), await nc.subscribe(S.progress(NAME, "c1"))
    running = asyncio.create_task(ask(nc, signed(call("held", progress=S.progress(NAME, "c1")), executor_key), "held"))
    await progress.next_msg(timeout=WAIT_S)  # the call runs
    stopping = asyncio.create_task(worker.stop(grace_s=WAIT_S))
    said = msgspec.json.decode((await alive.next_msg(timeout=WAIT_S)).data, type=WorkerAlive)
    assert said.stopping and said.instance == worker.instance
    with pytest.raises(nats.errors.NoRespondersError):
        await ask(nc, signed(call(call_id="c2"), executor_key))
    held.release()
    assert (await running).outcome == "ok" and held.finished == ["c1"]
    await stopping
    await connection.close()


async def test_a_call_still_running_when_the_grace_ends_gets_no_answer(
    nc: Client, server: ServerProcess, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    connection = await nats.connect(server.url)
    worker = Worker(connection, held, NAME, executor_key.public_key())
    await worker.start()
    progress = await nc.subscribe(S.progress(NAME, "c1"))
    running = asyncio.create_task(
        ask(nc, signed(call("held", progress=S.progress(NAME, "c1")), executor_key), "held", 2)
    )
    await progress.next_msg(timeout=WAIT_S)
    await worker.stop(grace_s=0.2)
    with pytest.raises(nats.errors.TimeoutError):
        await running
    assert held.finished == []
    await connection.close()


async def test_two_instances_in_the_queue_group_share_the_calls_each_answered_once(
    nc: Client, worker_of: WorkerOf, executor_key: Ed25519PrivateKey
) -> None:
    first, second = await worker_of(Held(), max_concurrent=64), await worker_of(Held(), max_concurrent=64)
    answers = await asyncio.gather(*(ask(nc, signed(call(call_id=f"c{i}"), executor_key)) for i in range(40)))
    assert {answer.outcome for answer in answers} == {"ok"}
    assert {answer.instance for answer in answers} == {first.instance, second.instance}
    assert sorted(answer.call_id for answer in answers) == sorted(f"c{i}" for i in range(40))
    served = [len(worker.answering.calls) for worker in (first, second)]  # type: ignore[attr-defined]
    assert sum(served) == 40


async def test_a_call_above_the_concurrency_bound_is_answered_busy_unrun(
    nc: Client, worker_of: WorkerOf, held: Held, executor_key: Ed25519PrivateKey
) -> None:
    await worker_of(held, max_concurrent=1)
    progress = await nc.subscribe(S.progress(NAME, "c1"))
    running = asyncio.create_task(ask(nc, signed(call("held", progress=S.progress(NAME, "c1")), executor_key), "held"))
    await progress.next_msg(timeout=WAIT_S)
    busy = await ask(nc, signed(call(call_id="c2"), executor_key))
    assert (busy.outcome, busy.reason_code, busy.retryable) == ("failed", "worker_busy", True)
    assert [one.call_id for one in held.calls] == ["c1"]
    held.release()
    assert (await running).outcome == "ok"
