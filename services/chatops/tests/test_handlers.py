"""The bot's broker edge: only signed approval events change a card; chat faults settle as they should."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.chatops.errors import ChatRefused
from toolgate.chatops.handlers import ChatOpsRuntime, consumers
from toolgate.chatops.service import ChatOps
from toolgate.shared.handling import Delivery, Later, Settle
from toolgate.shared.signing import sign_event

KEY = Ed25519PrivateKey.generate()


def _delivery(event: Any, subject: str = "tg.approval.requested.agent-a.r1") -> Delivery:
    data = event if isinstance(event, bytes) else msgspec.json.encode(event)
    return Delivery(subject, data, {}, 1, 1, datetime.now(UTC))


@pytest.fixture
def on_approval(chatops: ChatOps) -> Any:
    runtime = ChatOpsRuntime(chatops, KEY.public_key())
    return consumers(lambda: runtime)[0].handle


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
