"""What the SDK reads back through ``tg.records.get.<principal>``: checked as the stream's bytes were; no answer is
"cannot read now"."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import nats
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.events import ReceiptIssued, encode
from effectgate.contracts.rpc.records import STATUS_HEADER
from effectgate.contracts.vocabulary import Outcome
from effectgate.devstack.servers import ServerProcess
from effectgate.sdk import RecordsNoAnswer, ToolClient
from effectgate.sdk.records import RecordReader
from effectgate.sdk.standing import DecisionVerifier, stored_decision

pytestmark = pytest.mark.connected

AGENT = "records-agent"


def _receipt(principal: str, request_id: str) -> ReceiptIssued:
    return ReceiptIssued(
        event_id="e-" + request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        tool="t",
        outcome=Outcome.REFUSED,
        reason_code="invalid_tool",
        reason="no such tool",
    )


async def test_without_an_executor_a_read_is_cannot_read_now(server: ServerProcess) -> None:
    connection = await nats.connect(server.url)  # nobody answers tg.records.get.*
    try:
        with pytest.raises(RecordsNoAnswer, match="no answer"):
            await RecordReader(connection, AGENT, timeout_s=1).read("tg.receipt.records-agent.r1")
        with pytest.raises(nats.errors.TimeoutError):  # what decision() raised when the stream did not answer
            await stored_decision(RecordReader(connection, AGENT, timeout_s=1), "r1", DecisionVerifier(None))
    finally:
        await connection.close()


async def test_a_receipt_the_responder_answers_for_another_request_is_not_believed(server: ServerProcess) -> None:
    """A found answer is as untrusted as a stream message: another request's receipt is no answer."""
    responder = await nats.connect(server.url)
    other = encode(_receipt(AGENT, "someone-else"))

    async def answer(msg: Msg) -> None:
        await responder.publish(msg.reply, other, headers={STATUS_HEADER: "found"})

    await responder.subscribe(Rpc.records_get(AGENT), cb=answer)
    await responder.flush()
    try:
        async with await ToolClient.connect(server.url, AGENT, verify_receipts=False) as client:
            assert await client._waiter._stored("r1") is None
    finally:
        await responder.close()


async def test_a_refusal_reads_as_no_record_with_its_reason(server: ServerProcess) -> None:
    responder = await nats.connect(server.url)
    refusal = msgspec.json.encode({"ok": False, "reason_code": "unavailable", "reason": "ask again"})

    async def answer(msg: Msg) -> None:
        await responder.publish(msg.reply, refusal, headers={STATUS_HEADER: "unavailable"})

    await responder.subscribe(Rpc.records_get(AGENT), cb=answer)
    await responder.flush()
    connection = await nats.connect(server.url)
    try:
        with pytest.raises(RecordsNoAnswer, match="unavailable: ask again"):
            await RecordReader(connection, AGENT).read("tg.receipt.records-agent.r1")
    finally:
        await connection.close()
        await responder.close()


async def test_a_stored_decision_is_read_back_and_none_when_there_is_none(nc: Client) -> None:
    records = RecordReader(nc, AGENT)
    assert await stored_decision(records, "never-decided", DecisionVerifier(None)) is None
