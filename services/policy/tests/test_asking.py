"""The copy of a decision that needs approval: the one thing the approvals service consumes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import STREAM, Subjects
from effectgate.contracts.events import DecisionMade, decode_event, encode
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.adapters.asking import ask_for_approval
from effectgate.shared.stores.stream import next_message, publish_once

pytestmark = pytest.mark.connected

POLICY = Ed25519PrivateKey.generate()
KEY = POLICY.public_key()


def _decision(rid: str, verdict: Verdict, about: str | None = None) -> DecisionMade:
    decision = DecisionMade(
        event_id=f"d-{rid}-{verdict.value}",
        occurred_at=datetime.now(UTC),
        request_id=about or rid,
        principal="demo-agent",
        verdict=verdict,
        reason_code="needs_approval" if verdict is Verdict.NEEDS_APPROVAL else "ok",
        reason="r",
    )
    return sign_event(decision, POLICY)


async def _decided(js: JetStreamContext, rid: str, decision: DecisionMade) -> bool:
    return await publish_once(js, Subjects.decision("demo-agent", rid), decision)


async def _copies(js: JetStreamContext, rid: str) -> list[Any]:
    found, seq = [], 1
    while (message := await next_message(js, Subjects.needs_approval("demo-agent", rid), seq)) is not None:
        found.append(_decoded(message.data or b""))
        seq = (message.seq or 0) + 1
    return found


def _decoded(data: bytes) -> Any:
    try:
        return decode_event(data)
    except msgspec.DecodeError:
        return None


@pytest.mark.parametrize("verdict", [Verdict.EXECUTE, Verdict.DENY])
async def test_a_decision_that_needs_no_approval_is_not_copied(js: JetStreamContext, ns: str, verdict: Verdict) -> None:
    decision = _decision(ns, verdict)
    await ask_for_approval(js, decision, await _decided(js, ns, decision), KEY)
    assert await _copies(js, ns) == []


async def test_a_decision_that_needs_approval_is_copied_once(js: JetStreamContext, ns: str) -> None:
    decision = _decision(ns, Verdict.NEEDS_APPROVAL)
    await ask_for_approval(js, decision, await _decided(js, ns, decision), KEY)
    await ask_for_approval(js, decision, True, KEY)  # a redelivered request publishing again
    assert await _copies(js, ns) == [decision]


async def test_a_redelivered_request_copies_the_decision_stored_first(js: JetStreamContext, ns: str) -> None:
    first = _decision(ns, Verdict.NEEDS_APPROVAL)
    await _decided(js, ns, first)  # then the policy stopped
    later = _decision(ns, Verdict.DENY)  # decided again (a fault denial on the last delivery)
    await ask_for_approval(js, later, await _decided(js, ns, later), KEY)
    assert await _copies(js, ns) == [first]


async def test_a_redelivered_request_whose_first_decision_runs_is_not_copied(js: JetStreamContext, ns: str) -> None:
    await _decided(js, ns, _decision(ns, Verdict.EXECUTE))
    later = _decision(ns, Verdict.NEEDS_APPROVAL)  # a policy change meanwhile does not count
    await ask_for_approval(js, later, await _decided(js, ns, later), KEY)
    assert await _copies(js, ns) == []


@pytest.mark.parametrize("squatter", ["another request's", "unsigned"])
async def test_a_first_decision_that_is_not_the_requests_own_is_never_copied(
    js: JetStreamContext, ns: str, squatter: str
) -> None:
    other = _decision(ns, Verdict.NEEDS_APPROVAL, about=f"{ns}-other")
    unsigned = msgspec.structs.replace(other, request_id=ns, signature="")
    await _decided(js, ns, other if squatter == "another request's" else unsigned)
    later = _decision(ns, Verdict.NEEDS_APPROVAL)
    await ask_for_approval(js, later, await _decided(js, ns, later), KEY)
    assert await _copies(js, ns) == []


@pytest.mark.parametrize("junk", [b"", b"{}", "another request's copy"])
async def test_junk_on_the_copy_subject_neither_blocks_nor_replaces_the_copy(
    js: JetStreamContext, ns: str, junk: bytes | str
) -> None:
    subject = Subjects.needs_approval("demo-agent", ns)
    body = junk if isinstance(junk, bytes) else encode(_decision(ns, Verdict.NEEDS_APPROVAL, about=f"{ns}-b"))
    await js.publish(subject, body, stream=STREAM)  # a server reply a client aimed there, stored first
    decision = _decision(ns, Verdict.NEEDS_APPROVAL)
    await ask_for_approval(js, decision, await _decided(js, ns, decision), KEY)
    await ask_for_approval(js, decision, True, KEY)  # redelivered: the copy is found, not made again
    copies = await _copies(js, ns)
    assert copies[-1] == decision and copies.count(decision) == 1 and len(copies) == 2
