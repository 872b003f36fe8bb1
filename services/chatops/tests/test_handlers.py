"""The bot's broker edge: only signed approval events change a card; chat faults settle as they should."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.chatops.errors import ChatRefused
from effectgate.chatops.handlers import ChatOpsRuntime, consumers
from effectgate.chatops.service import ChatOps
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome
from effectgate.shared.consumer.consumers import Delivery
from effectgate.shared.consumer.worker import Later, Settle

KEY, RECEIPTS = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()


def _delivery(event: Any, subject: str = "tg.approval.requested.agent-a.r1") -> Delivery:
    data = event if isinstance(event, bytes) else msgspec.json.encode(event)
    return Delivery(subject, data, {}, 1, 1, datetime.now(UTC))


@pytest.fixture
def on_approval(chatops: ChatOps) -> Any:
    runtime = ChatOpsRuntime(chatops, KEY.public_key(), RECEIPTS.public_key())
    return consumers(lambda: runtime)[0].handle


@pytest.fixture
def on_receipt(chatops: ChatOps) -> Any:
    runtime = ChatOpsRuntime(chatops, KEY.public_key(), RECEIPTS.public_key())
    return consumers(lambda: runtime)[1].handle


def _receipt(outcome: str = "succeeded") -> ReceiptIssued:
    return ReceiptIssued(
        event_id="receipt:agent-a:r1",
        occurred_at=datetime.now(UTC),
        request_id="r1",
        principal="agent-a",
        outcome=Outcome(outcome),
        reason_code="ok",
        reason="",
    )


async def test_a_signed_request_makes_a_card(on_approval: Any, chat: Any, make_requested: Any) -> None:
    assert await on_approval(_delivery(sign_event(make_requested(), KEY))) is Settle.ACK
    assert len(chat.posted) == 1


@pytest.mark.parametrize("signer", [None, Ed25519PrivateKey.generate()], ids=["unsigned", "foreign key"])
async def test_a_forged_request_makes_no_card_and_is_reported(
    on_approval: Any, chat: Any, reports: list[Any], make_requested: Any, signer: Ed25519PrivateKey | None
) -> None:
    event = make_requested() if signer is None else sign_event(make_requested(), signer)
    assert await on_approval(_delivery(event)) is Settle.TERM
    assert chat.posted == []
    ((kind, fields),) = reports
    assert (kind, fields["reason_code"]) == ("approval_forged", "signature_invalid")


async def test_tampered_content_is_forged(on_approval: Any, chat: Any, make_requested: Any) -> None:
    body = msgspec.to_builtins(sign_event(make_requested(), KEY))
    body["request"]["arguments"] = {"path": "/etc/passwd"}
    assert await on_approval(_delivery(msgspec.json.encode(body))) is Settle.TERM
    assert chat.posted == []


@pytest.mark.parametrize("data", [b"", b"{", b'{"type": "receipt.issued"}', b"[]" * 10])
async def test_undecodable_bytes_are_terminated(on_approval: Any, data: bytes) -> None:
    assert await on_approval(_delivery(data)) is Settle.TERM


async def test_chat_down_is_retried_later_and_a_refused_update_is_skipped(
    on_approval: Any, chat: Any, make_requested: Any
) -> None:
    chat.down = True
    assert isinstance(await on_approval(_delivery(sign_event(make_requested(), KEY))), Later)
    chat.down = False

    async def refused(room: str, card: Any, txn_id: str) -> str:
        raise ChatRefused("channel_not_found")

    chat.post_card = refused
    assert await on_approval(_delivery(sign_event(make_requested(), KEY))) is Settle.ACK


@pytest.mark.parametrize("signer", [None, KEY], ids=["unsigned", "signed by the approvals key"])
async def test_only_receipts_signed_by_the_executor_are_posted(
    on_approval: Any, on_receipt: Any, chat: Any, reports: list[Any], make_requested: Any, signer: Any
) -> None:
    await on_approval(_delivery(sign_event(make_requested(), KEY)))
    forged = _receipt() if signer is None else sign_event(_receipt(), signer)
    assert await on_receipt(_delivery(forged, "tg.receipt.agent-a.r1")) is Settle.TERM
    assert chat.thread == []
    assert [(kind, fields["reason_code"]) for kind, fields in reports] == [("receipt_forged", "signature_invalid")]
    real = sign_event(_receipt("denied"), RECEIPTS)
    assert await on_receipt(_delivery(real, "tg.receipt.agent-a.r1")) is Settle.ACK
    assert "denied" in chat.thread[-1][2]  # the forgery did not take the real outcome's place


async def test_an_outcome_waits_for_its_card_while_chat_is_down(
    on_approval: Any, on_receipt: Any, chat: Any, make_requested: Any
) -> None:
    chat.down = True
    assert isinstance(await on_approval(_delivery(sign_event(make_requested(), KEY))), Later)
    assert isinstance(await on_receipt(_delivery(sign_event(_receipt(), RECEIPTS), "tg.receipt.agent-a.r1")), Later)
    chat.down = False
    assert await on_approval(_delivery(sign_event(make_requested(), KEY))) is Settle.ACK
    assert await on_receipt(_delivery(sign_event(_receipt(), RECEIPTS), "tg.receipt.agent-a.r1")) is Settle.ACK
    assert any("succeeded" in text for *_, text, _ in chat.thread)
