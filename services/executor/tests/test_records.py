"""``tg.records.get.<principal>`` on real NATS: an agent reads back its own stored records, and nothing else.

The executor's own router answers (:func:`effectgate.executor.handlers.build_router`); a found
record comes back as stored, byte for byte, up to the bus's ``max_payload``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import msgspec
import nats
import pytest
from faststream.nats import NatsBroker
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.rpc.records import MAX_QUERY_BYTES, STATUS_HEADER, RecordReply
from effectgate.executor.handlers import ExecutorRuntime, build_router
from effectgate.executor.ports import RECEIPT_HEADROOM_BYTES
from effectgate.shared.runtime.assembly import RuntimeCell
from effectgate.shared.stores.records import HEADER_BYTES, record_answer

pytestmark = pytest.mark.connected

SIGNATURE_BYTES = 120
"""What signing adds to a fitted receipt's JSON, at most (88 base64 characters and the field), bytes."""

JETSTREAM_OVERHEAD_BYTES = 40
"""Bytes under ``max_payload`` less the subject that JetStream still keeps a message within (its limit is ~36)."""

KINDS: dict[str, Callable[[str, str], str]] = {
    "receipt": Subjects.receipt,
    "decision": Subjects.decision,
    "result": lambda principal, rid: Subjects.result_chunk(principal, f"{rid}_0a1b2c3d", 0),
}


@pytest.fixture
async def client(js: JetStreamContext, nats_url: str) -> AsyncIterator[Client]:
    """A connection whose requests the executor's router answers (a broker of its own, reading ``js``)."""
    cell: RuntimeCell[ExecutorRuntime] = RuntimeCell()
    unused = cast(Any, None)
    cell.set(ExecutorRuntime(unused, unused, unused, unused, js, unused, unused, unused))
    broker = NatsBroker(nats_url)
    broker.include_router(build_router(cell))
    await broker.start()
    connection = await nats.connect(nats_url)
    yield connection
    await connection.close()
    await broker.stop()


async def _store(js: JetStreamContext, subject: str, data: bytes) -> None:
    stream = catalog.RESULTS_STREAM if subject.startswith("tg.result.") else catalog.STREAM
    await js.publish(subject, data, stream=stream)


async def _ask(client: Client, principal: str, body: bytes) -> Msg:
    return await client.request(Rpc.records_get(principal), body, timeout=10)


def _query(subject: str) -> bytes:
    return msgspec.json.encode({"subject": subject})


def _refusal(reply: Msg) -> RecordReply:
    refusal = msgspec.json.decode(reply.data, type=RecordReply)
    assert not refusal.ok and reply.headers is not None and reply.headers[STATUS_HEADER] == refusal.reason_code
    return refusal


@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_agent_reads_its_own_record_as_stored(
    client: Client, js: JetStreamContext, ns: str, kind: str
) -> None:
    subject, stored = KINDS[kind](ns, "r1"), b'{"exactly": "as stored", "bytes": "\\u00e9"}'
    await _store(js, subject, stored)
    reply = await _ask(client, ns, _query(subject))
    assert reply.headers == {STATUS_HEADER: "found"}
    assert reply.data == stored


@pytest.mark.parametrize("kind", list(KINDS))
async def test_another_principals_record_is_refused_though_stored(
    client: Client, js: JetStreamContext, ns: str, kind: str
) -> None:
    subject = KINDS[kind](f"{ns}-victim", "r1")
    await _store(js, subject, b"secret")
    refusal = _refusal(await _ask(client, ns, _query(subject)))
    assert refusal.reason_code == "not_yours" and "another principal" in refusal.reason
    assert b"secret" not in (await _ask(client, ns, _query(subject))).data


@pytest.mark.parametrize("kind", list(KINDS))
async def test_nothing_stored_is_not_found_told_apart_from_found(client: Client, ns: str, kind: str) -> None:
    refusal = _refusal(await _ask(client, ns, _query(KINDS[kind](ns, "never"))))
    assert refusal.reason_code == "not_found"


@pytest.mark.parametrize(
    "subject",
    [
        lambda p: Subjects.request(p),
        lambda p: Subjects.needs_approval(p, "r1"),
        lambda p: Subjects.approval("granted", p, "r1"),
        lambda p: Subjects.claim(p, "k1"),
        lambda p: Subjects.receipts_of(p),
        lambda p: Subjects.results_of(p),
        lambda p: Subjects.decisions_of(p),
        lambda p: f"{Subjects.result_prefix(p, 'r1_00')}.-1",
        lambda p: f"{Subjects.result_prefix(p, 'r1_00')}.01",
        lambda p: f"{Subjects.receipt(p, 'r1')}.extra",
        lambda p: f"$KV.{catalog.TOOLS_BUCKET}.latest.x",
        lambda p: "",
    ],
    ids=[
        "request",
        "needs-approval",
        "approval",
        "claim",
        "receipts-wildcard",
        "results-wildcard",
        "decisions-wildcard",
        "negative-index",
        "padded-index",
        "extra-token",
        "kv",
        "empty",
    ],
)
async def test_a_subject_that_is_no_record_is_refused_naming_it(
    client: Client, js: JetStreamContext, ns: str, subject: Callable[[str], str]
) -> None:
    refusal = _refusal(await _ask(client, ns, _query(subject(ns))))
    assert refusal.reason_code == "not_a_record", refusal


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", "malformed"),
        (b"not json", "malformed"),
        (b'{"subject": 1}', "malformed"),
        (b'{"subject": "tg.receipt.p.r", "and": "more"}', "malformed"),
        (b"[" * 500 + b"]" * 500, "malformed"),
        (b'{"subject": "' + b"a" * MAX_QUERY_BYTES + b'"}', "oversized"),
    ],
    ids=["empty", "not-json", "not-a-string", "unknown-field", "nested", "oversized"],
)
async def test_a_malformed_or_oversized_query_is_refused_naming_why(
    client: Client, ns: str, body: bytes, code: str
) -> None:
    refusal = _refusal(await _ask(client, ns, body))
    assert refusal.reason_code == code and refusal.reason


async def test_a_receipt_as_large_as_the_executor_stores_comes_back_whole(
    client: Client, js: JetStreamContext, ns: str
) -> None:
    """The largest receipt the executor publishes (max_payload less its headroom, signed) fits its answer."""
    subject = Subjects.receipt(ns, "big")
    stored = b"r" * (client.max_payload - RECEIPT_HEADROOM_BYTES + SIGNATURE_BYTES)
    await _store(js, subject, stored)
    reply = await _ask(client, ns, _query(subject))
    assert reply.headers == {STATUS_HEADER: "found"} and reply.data == stored


async def test_the_largest_record_jetstream_keeps_comes_back_whole(
    client: Client, js: JetStreamContext, ns: str
) -> None:
    """JetStream keeps a message a few dozen bytes under ``max_payload`` (its subject and record count too)."""
    subject = Subjects.result_chunk(ns, "r1_00", 0)
    stored = b"x" * (client.max_payload - len(subject) - JETSTREAM_OVERHEAD_BYTES)
    await _store(js, subject, stored)
    reply = await _ask(client, ns, _query(subject))
    assert reply.headers == {STATUS_HEADER: "found"} and reply.data == stored
    assert len(reply.data) + HEADER_BYTES <= client.max_payload


async def test_a_record_over_what_an_answer_carries_is_refused_too_large_not_dropped(
    js: JetStreamContext, ns: str
) -> None:
    subject, stored = Subjects.receipt(ns, "r1"), b"r" * 10_000
    await _store(js, subject, stored)
    fits = await record_answer(js, ns, _query(subject), max_payload=len(stored) + HEADER_BYTES)
    assert fits.headers == {STATUS_HEADER: "found"} and fits.body == stored
    over = await record_answer(js, ns, _query(subject), max_payload=len(stored) + HEADER_BYTES - 1)
    refusal = msgspec.json.decode(over.body, type=RecordReply)
    assert over.headers == {STATUS_HEADER: "too_large"} and refusal.reason_code == "too_large"
    assert str(len(stored)) in refusal.reason
