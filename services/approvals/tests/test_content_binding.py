"""An approval opens only with the executor's signed reading of the call's files, and binds it into the grant."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.approvals.errors import ContentsUnavailable
from effectgate.approvals.memory import InMemoryApprovalsBus, InMemoryApprovalStore
from effectgate.approvals.rebuild import rebuild_approvals
from effectgate.contracts.events import ApprovalGranted, ApprovalRequested
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.contents import ContentAnswer, ContentQuery
from effectgate.contracts.tools.contents import ContentKind, ContentState

SEEN = (
    ContentState(pointer="/path", path="notes.txt", kind=ContentKind.FILE, sha256="sha256:" + "a" * 64, size_bytes=5),
)


def _reading(kit: Any, contents: tuple[ContentState, ...] = SEEN) -> list[ContentQuery]:
    """Make the kit's executor read ``contents`` for every query; return the queries it is asked."""
    asked: list[ContentQuery] = []

    def read(query: ContentQuery) -> tuple[ContentState, ...]:
        asked.append(query)
        return contents

    kit.bus.read = read
    return asked


async def test_the_executors_reading_goes_into_the_request_the_listing_and_the_grant(kit: Any) -> None:
    asked = _reading(kit)
    decision = kit.decision("a")

    await kit.approvals.on_decision(decision)
    [listed] = await kit.approvals.list_pending()
    await kit.answer("alice", "a")

    [query] = asked
    assert (query.principal, query.request, query.request_hash) == (
        decision.principal,
        decision.request,
        decision.request_hash,
    )
    [requested] = kit.events(ApprovalRequested)
    [granted] = kit.events(ApprovalGranted)
    assert requested.contents == granted.contents == listed.contents == SEEN


async def test_a_request_joining_an_approval_is_bound_to_what_the_approval_read_first(kit: Any) -> None:
    _reading(kit)
    await kit.approvals.on_decision(kit.decision("a"))
    later = (msgspec.structs.replace(SEEN[0], sha256="sha256:" + "b" * 64),)
    _reading(kit, later)
    await kit.approvals.on_decision(kit.decision("b"))  # same key and call: joins "a"
    await kit.answer("alice", "a")

    grants = {event.request_id: event.contents for event in kit.events(ApprovalGranted)}
    assert grants == {kit.ns + "a": SEEN, kit.ns + "b": SEEN}


def _answers(kit: Any) -> dict[str, Any]:
    def signed_by(key: Ed25519PrivateKey, **change: Any) -> Any:
        def answer(query: ContentQuery) -> ContentAnswer:
            fields = {"request_hash": query.request_hash, "checked_at": kit.clock(), "contents": SEEN, **change}
            return sign_event(ContentAnswer(ok=True, reason_code="read", reason="read", **fields), key)

        return answer

    return {
        "silent": lambda query: None,
        "refused": lambda query: ContentAnswer(ok=False, reason_code="descriptor_mismatch", reason="not decided"),
        "forged": signed_by(Ed25519PrivateKey.generate()),
        "other-request": signed_by(kit.bus.executor, request_hash="sha256:other"),
        "stale": signed_by(kit.bus.executor, checked_at=kit.clock() - timedelta(seconds=61)),
    }


@pytest.mark.parametrize("answer", ["silent", "refused", "forged", "other-request", "stale"])
async def test_without_a_signed_fresh_reading_of_this_request_no_approval_opens(kit: Any, answer: str) -> None:
    reply = _answers(kit)[answer]

    async def contents(query: ContentQuery) -> ContentAnswer | None:
        return reply(query)

    kit.bus.contents = contents

    with pytest.raises(ContentsUnavailable) as unavailable:
        await kit.approvals.on_decision(kit.decision("a"))

    assert unavailable.value.reason_code == "contents_unavailable"
    assert await kit.store.get(kit.approval_id("a")) is None and kit.published == []


async def test_the_rebuild_restores_what_the_approval_bound(kit: Any) -> None:
    _reading(kit)
    await kit.approvals.on_decision(kit.decision("a"))
    [requested] = kit.events(ApprovalRequested)
    rebuilt = InMemoryApprovalStore()
    rebuilt.lose_everything()  # as after a Redis restart: the stream is what it is rebuilt from

    await rebuild_approvals(rebuilt, InMemoryApprovalsBus(requests=[requested]), "me", kit.key.public_key())

    restored = await rebuilt.get(kit.approval_id("a"))
    assert restored is not None and restored.contents == SEEN
