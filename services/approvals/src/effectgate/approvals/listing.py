"""Pending approvals in pages (``tg.approvals.list``) and one approval in full (``tg.approvals.show``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial

import msgspec

from effectgate.approvals.domain import ApprovalState, PendingApproval
from effectgate.approvals.errors import ApprovalsError
from effectgate.approvals.ports import ApprovalsBus, ApprovalStore
from effectgate.approvals.related import related_to
from effectgate.contracts.approval_ids import APPROVAL_ID
from effectgate.contracts.bus.paging import MAX_CURSOR_CHARS, MAX_QUERY_BYTES, PageQuery, page_query_of
from effectgate.contracts.errors import IndexLost
from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.rpc.approvals import ApprovalShown, ApprovalsPage, ShowQuery
from effectgate.contracts.tools.secret_arguments import redact_sealed
from effectgate.shared.consumer.paging import PageFiller, items_budget

__all__ = ["SUMMARY_ARGUMENT_BYTES", "list_page", "listed", "page", "show", "shown", "summaries"]

SUMMARY_ARGUMENT_BYTES = 1024
"""In summary mode, arguments whose JSON is larger than this (bytes) are left out of a listed approval."""

_show = msgspec.json.Decoder(ShowQuery)
_ENVELOPE = msgspec.json.encode(
    ApprovalsPage(ok=True, reason_code="found", reason="x" * 80, approvals=[], next="x" * MAX_CURSOR_CHARS)
)


async def list_page(
    store: ApprovalStore, bus: ApprovalsBus, data: bytes, max_payload: int
) -> ApprovalsPage[msgspec.Raw]:
    """Answer one ``tg.approvals.list`` body (a page query; empty: the first page); never raises for its content.

    Returns:
        The page (``found``), or ``malformed``, ``oversized`` (the query), ``index_lost``,
        ``approval_store_unavailable``.
    """
    query = page_query_of(data)
    if isinstance(query, tuple):
        return ApprovalsPage(ok=False, reason_code=query[0], reason=query[1])
    try:
        return await page(store, bus, query, max_payload)
    except ValueError as error:
        return ApprovalsPage(ok=False, reason_code="malformed", reason=str(error))
    except (ApprovalsError, IndexLost) as error:
        return ApprovalsPage(ok=False, reason_code=error.reason_code, reason=error.reason)


async def show(store: ApprovalStore, bus: ApprovalsBus, data: bytes, max_payload: int) -> ApprovalShown[msgspec.Raw]:
    """Answer one ``tg.approvals.show`` body (``{"approval_id": …}``); never raises for its content."""
    if len(data) > MAX_QUERY_BYTES:
        return ApprovalShown(ok=False, reason_code="oversized", reason=f"the query is {len(data)} bytes")
    try:
        query = decode_untrusted(_show, data)
        return await shown(store, bus, query.approval_id, max_payload)
    except msgspec.DecodeError as error:
        return ApprovalShown(ok=False, reason_code="malformed", reason=f'not {{"approval_id": …}}: {error}')
    except (ApprovalsError, IndexLost) as error:
        return ApprovalShown(ok=False, reason_code=error.reason_code, reason=error.reason)


def listed(pending: PendingApproval) -> PendingApproval:
    """A pending approval as listed: the request hash binds the envelopes, people see a label."""
    arguments = redact_sealed(pending.request.arguments)
    return msgspec.structs.replace(pending, request=msgspec.structs.replace(pending.request, arguments=arguments))


def summaries(item: PendingApproval) -> Iterator[PendingApproval]:
    """``item`` smaller and smaller: its arguments left out, then its joined and related requests too."""
    size = len(msgspec.json.encode(item.request.arguments))
    bare = msgspec.structs.replace(item.request, arguments={})
    yield msgspec.structs.replace(item, request=bare, omitted=("arguments",), arguments_bytes=size)
    omitted = ("arguments", "joined", "related")
    yield msgspec.structs.replace(item, request=bare, joined=(), related=(), omitted=omitted, arguments_bytes=size)


async def page(
    store: ApprovalStore, bus: ApprovalsBus, query: PageQuery, max_payload: int
) -> ApprovalsPage[msgspec.Raw]:
    """One page of pending approvals after ``query.after``, within ``max_payload`` bytes once encoded.

    Raises:
        ValueError: ``query.after`` is not a cursor of this listing.
        ApprovalsError: the store cannot be read (``IndexLost`` while it is rebuilt).
    """
    after = _cursor_of(query.after) if query.after is not None else None
    filler = PageFiller(items_budget(max_payload, _ENVELOPE), query.limit)
    full = False
    for expiry, approval_id in await store.pending_index():
        if after is not None and (expiry, approval_id) <= after:
            continue
        pending = await store.get(approval_id)
        if pending is None or pending.state is not ApprovalState.PENDING:
            continue  # answered since the index was read
        item = await _item(pending, store, bus, query.summary)
        if not filler.offer(f"{expiry!r}/{approval_id}", _encoded(item), partial(_encoded_summaries, item)):
            full = True
            break
    count = len(filler.items)
    reason = f"{count} pending approval{'' if count == 1 else 's'}" + (" (more on the next page)" if full else "")
    return ApprovalsPage(
        ok=True, reason_code="found", reason=reason, approvals=filler.items, next=filler.last_key if full else None
    )


async def shown(
    store: ApprovalStore, bus: ApprovalsBus, approval_id: str, max_payload: int
) -> ApprovalShown[msgspec.Raw]:
    """The approval ``approval_id`` names (or that its request joined), in any state, within ``max_payload``.

    Raises:
        ApprovalsError: the store cannot be read.
    """
    answering = await store.answering(approval_id) if APPROVAL_ID.match(approval_id) else None
    pending = None if answering is None else await store.get(answering)
    if pending is None:
        return ApprovalShown(ok=False, reason_code="unknown_approval", reason=f"no approval {approval_id!r}")
    item = await _item(pending, store, bus, summary=False)
    budget = items_budget(
        max_payload, msgspec.json.encode(ApprovalShown(ok=True, reason_code="found", reason="x" * 120))
    )
    for candidate in (item, *summaries(item)):
        if len(encoded := _encoded(candidate)) <= budget:
            reason = (
                "found"
                if not candidate.omitted
                else f"too large for one message: {', '.join(candidate.omitted)} left out"
            )
            return ApprovalShown(ok=True, reason_code="found", reason=reason, approval=msgspec.Raw(encoded))
    return ApprovalShown(ok=False, reason_code="reply_too_large", reason=f"{approval_id} does not fit one message")


async def _item(pending: PendingApproval, store: ApprovalStore, bus: ApprovalsBus, summary: bool) -> PendingApproval:
    item = listed(msgspec.structs.replace(pending, related=await related_to(pending, store, bus)))
    if summary and len(msgspec.json.encode(item.request.arguments)) > SUMMARY_ARGUMENT_BYTES:
        return next(summaries(item))
    return item


def _encoded(item: PendingApproval) -> bytes:
    return msgspec.json.encode(item)


def _encoded_summaries(item: PendingApproval) -> Iterator[bytes]:
    return map(_encoded, summaries(item))


def _cursor_of(text: str) -> tuple[float, str]:
    """``(expiry, approval id)`` of a ``next`` cursor.

    Raises:
        ValueError: not ``<expiry>/<approval id>``.
    """
    expiry, _, approval_id = text.partition("/")
    if not APPROVAL_ID.match(approval_id) or not math.isfinite(value := float(expiry)):
        raise ValueError(f"not a cursor of this listing: {text[:80]!r}")
    return value, approval_id
