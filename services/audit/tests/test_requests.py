"""``tg.audit.requests`` lists recent requests with their outcomes, by principal and time, bounded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from effectgate.audit.adapters.sqlite import SqliteAuditStore
from effectgate.audit.intake import entry_of
from effectgate.audit.service import Audit
from effectgate.contracts.rpc.audit import MAX_REQUESTS, RequestsQuery


async def _no_seq() -> int | None:
    return None


def _body(**fields: object) -> bytes:
    return json.dumps(fields).encode()


@pytest.fixture
async def audit(tmp_path: Path) -> AsyncIterator[Audit]:
    store = SqliteAuditStore(tmp_path / "audit.sqlite3")
    calls = [
        ("ann", "r1", "2026-01-01T10:00:00Z"),
        ("bob", "r2", "2026-01-01T11:00:00Z"),
        ("ann", "r3", "2026-01-01T12:00:00.5Z"),
    ]
    seq = 0
    for principal, rid, at in calls:
        seq += 1
        asked = _body(type="tool.requested", request_id=rid, tool="file_system", operation="read", occurred_at=at)
        await store.append(entry_of(f"tg.req.{principal}", asked, rid, seq, "t"))
    decided = _body(
        type="decision.made", request_id="r1", principal="ann", verdict="execute", reason_code="ok", reason="d"
    )
    receipt = _body(
        type="receipt.issued",
        request_id="r1",
        principal="ann",
        outcome="succeeded",
        reason_code="ok",
        reason="ran",
        version="1.2.0",
    )
    denied = _body(
        type="decision.made", request_id="r3", principal="ann", verdict="deny", reason_code="no_policy", reason="x"
    )
    for body, subject in (
        (decided, "tg.decision.ann.r1"),
        (receipt, "tg.receipt.ann.r1"),
        (denied, "tg.decision.ann.r3"),
    ):
        seq += 1
        await store.append(entry_of(subject, body, f"m{seq}", seq, "t"))
    yield Audit(store, _no_seq)
    await store.close()


async def test_newest_first_with_the_receipt_or_else_the_decision(audit: Audit) -> None:
    reply = await audit.requests(RequestsQuery())
    assert reply.ok and [r.request_id for r in reply.requests] == ["r3", "r2", "r1"]
    last, middle, first = reply.requests
    assert (first.outcome, first.verdict, first.reason_code, first.version) == ("succeeded", "execute", "ok", "1.2.0")
    assert (last.outcome, last.verdict, last.reason_code) == (None, "deny", "no_policy")
    assert (middle.outcome, middle.verdict, middle.principal, middle.tool) == (None, None, "bob", "file_system")


async def test_filtered_by_principal_time_and_limit(audit: Audit) -> None:
    ann = await audit.requests(RequestsQuery(principal="ann"))
    assert [r.request_id for r in ann.requests] == ["r3", "r1"]
    since = await audit.requests(RequestsQuery(since=datetime(2026, 1, 1, 11, 0, tzinfo=UTC)))
    assert [r.request_id for r in since.requests] == ["r3", "r2"]
    one = await audit.requests(RequestsQuery(limit=1))
    assert [r.request_id for r in one.requests] == ["r3"]


@pytest.mark.parametrize("limit", [0, -1, MAX_REQUESTS + 1])
async def test_a_limit_out_of_range_is_refused_naming_the_range(audit: Audit, limit: int) -> None:
    reply = await audit.requests(RequestsQuery(limit=limit))
    assert not reply.ok and not reply.requests and f"1 and {MAX_REQUESTS}" in reply.reason


async def test_another_principals_request_under_the_same_id_never_changes_this_ones(tmp_path: Path) -> None:
    store = SqliteAuditStore(tmp_path / "shared-id.sqlite3")
    events = [
        ("tg.req.ann", _body(type="tool.requested", request_id="same", tool="file_system", operation="read")),
        ("tg.req.bob", _body(type="tool.requested", request_id="same", tool="file_system", operation="write")),
        ("tg.decision.ann.same", _body(type="decision.made", request_id="same", principal="ann", verdict="execute")),
        ("tg.receipt.ann.same", _body(type="receipt.issued", request_id="same", principal="ann", outcome="succeeded")),
        ("tg.decision.bob.same", _body(type="decision.made", request_id="same", principal="bob", verdict="deny")),
    ]
    for seq, (subject, body) in enumerate(events, start=1):
        await store.append(entry_of(subject, body, f"m{seq}", seq, "t"))
    audit = Audit(store, _no_seq)

    ann = (await audit.requests(RequestsQuery(principal="ann"))).requests
    bob = (await audit.requests(RequestsQuery(principal="bob"))).requests
    both = {r.principal: (r.verdict, r.outcome) for r in (await audit.requests(RequestsQuery())).requests}
    await store.close()

    assert [(r.principal, r.verdict, r.outcome) for r in ann] == [("ann", "execute", "succeeded")]
    assert [(r.principal, r.verdict, r.outcome) for r in bob] == [("bob", "deny", None)]
    assert both == {"ann": ("execute", "succeeded"), "bob": ("deny", None)}
