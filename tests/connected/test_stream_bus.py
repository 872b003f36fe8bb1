"""The executor reads a request's events from the stream: only the first, only if it is about that request,
and for receipts only one its own key signed."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ApprovalGranted, DecisionMade, EffectClaimed, ReceiptIssued
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.adapters.stream import StreamBus
from effectgate.shared.stores.stream import publish_event

pytestmark = pytest.mark.connected


def _decision(principal: str, request_id: str, reason: str = "first") -> DecisionMade:
    return DecisionMade(
        event_id=f"d-{request_id}-{reason}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        verdict=Verdict.DENY,
        reason_code="x",
        reason=reason,
    )


async def test_a_copied_event_of_another_request_counts_as_absent(nc: Client, js: JetStreamContext, ns: str) -> None:
    bus, victim, other = StreamBus(nc, js, Ed25519PrivateKey.generate()), f"{ns}v", f"{ns}o"
    await publish_event(js, Subjects.decision("p", victim), _decision("p", other))
    receipt = ReceiptIssued(
        event_id=f"r-{other}",
        occurred_at=datetime.now(UTC),
        request_id=other,
        principal="p",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="ok",
    )
    await publish_event(js, Subjects.receipt("p", victim), receipt)
    grant = ApprovalGranted(
        event_id=f"g-{other}",
        occurred_at=datetime.now(UTC),
        request_id=other,
        principal="q",
        approval_id="ap-1",
        request_hash="sha256:x",
        approver="alice",
        expires_at=datetime.now(UTC),
    )
    await publish_event(js, Subjects.approval("granted", "p", victim), grant)
    assert await bus.decision("p", victim) is None
    assert await bus.receipt("p", victim) is None
    assert (await bus.approvals("p", victim)).granted == ()


async def test_the_first_event_of_a_subject_is_the_one_read(nc: Client, js: JetStreamContext, ns: str) -> None:
    bus = StreamBus(nc, js, Ed25519PrivateKey.generate())
    await publish_event(js, Subjects.decision("p", ns), _decision("p", ns, "first"))
    await publish_event(js, Subjects.decision("p", ns), _decision("p", ns, "later"))
    found = await bus.decision("p", ns)
    assert found is not None and found.reason == "first"


def _receipt(principal: str, request_id: str, reason: str) -> ReceiptIssued:
    return ReceiptIssued(
        event_id=f"r-{request_id}-{reason}",
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        principal=principal,
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason=reason,
    )


@pytest.mark.parametrize("forgery", ["unsigned", "foreign-signed", "signed-for-another-request"])
async def test_a_forged_receipt_first_on_the_subject_neither_ends_the_request_nor_blocks_the_real_one(
    nc: Client, js: JetStreamContext, ns: str, forgery: str
) -> None:
    key = Ed25519PrivateKey.generate()
    bus = StreamBus(nc, js, key)
    forged = {
        "unsigned": _receipt("p", ns, "forged"),
        "foreign-signed": sign_event(_receipt("p", ns, "forged"), Ed25519PrivateKey.generate()),
        "signed-for-another-request": sign_event(_receipt("p", f"{ns}x", "forged"), key),
    }[forgery]
    await publish_event(js, Subjects.receipt("p", ns), forged)
    assert await bus.receipt("p", ns) is None
    assert await bus.publish_receipt(_receipt("p", ns, "real")) is True
    found = await bus.receipt("p", ns)
    assert found is not None and found.reason == "real" and found.signature
    assert await bus.publish_receipt(_receipt("p", ns, "again")) is False
    assert (await bus.receipt("p", ns)) == found


@pytest.mark.parametrize(
    "junk", ['{"stream": "EFFECTGATE", "seq": 7}', '{"type": "io.nats.jetstream.api.v1.error"}', "x"]
)
async def test_junk_first_on_a_claim_subject_does_not_take_the_key(
    nc: Client, js: JetStreamContext, ns: str, junk: str
) -> None:
    bus, digest = StreamBus(nc, js, Ed25519PrivateKey.generate()), f"d{ns}"
    subject = Subjects.claim("p", digest)
    await js.publish(subject, junk.encode(), stream="EFFECTGATE")
    claim = EffectClaimed(
        event_id=f"c-{ns}",
        occurred_at=datetime.now(UTC),
        request_id=ns,
        principal="p",
        key_digest=digest,
        request_hash="sha256:x",
        effect_id="e",
        instance="i",
    )
    assert await bus.claim_effect(claim, digest) is None, "the real claim was published after the junk"
    later = msgspec.structs.replace(claim, event_id=f"c2-{ns}", request_id=f"{ns}b")
    assert await bus.claim_effect(later, digest) == claim, "the first real claim is the one that holds"
