"""Bodies of the approvals service's requests: list, show, decide, withdraw, status; an approval and its states.

An approval as the service stores it is the item its listing answers (:class:`PendingApproval`):
the approvals service, the chat-ops bot and the CLI read the one type.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final, Generic, TypeVar

import msgspec

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.events import BoundRequest, Related
from effectgate.contracts.tools.contents import ContentState
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass

__all__ = [
    "APPROVAL_NOT_OPEN",
    "MAX_WITHDRAW_BYTES",
    "ApprovalShown",
    "ApprovalStatus",
    "ApprovalsPage",
    "StatusCode",
    "ApprovalState",
    "DecideCommand",
    "DecideReply",
    "PendingApproval",
    "ShowQuery",
    "WithdrawCode",
    "WithdrawCommand",
    "WithdrawReply",
]

MAX_WITHDRAW_BYTES: Final = 1024
"""Largest accepted :class:`WithdrawCommand` body (and status query), bytes (a larger one is refused ``oversized``)."""

APPROVAL_NOT_OPEN: Final = "approval_not_open"
"""The :class:`DecideReply` code of an answer to an approval that is not open *yet*: its request
waits for its decision, or needs approval and its approval opens in a moment. Transient:
nothing changed, nothing is reported; answer again."""


class ApprovalState(StrEnum):
    """Where an approval is in its single-use life."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"


class PendingApproval(msgspec.Struct, frozen=True, kw_only=True):
    """An approval, as stored, as read and as listed (an item of ``tg.approvals.list``, ``tg.approvals.show``).

    Stored once when opened: every field up to ``approvers``, and ``opened_at`` and
    ``contents``. Read from the store's own records of the approval's life: ``state``,
    ``votes``, ``joined`` and ``answered_by``. Computed when listed: ``related``.

    Attributes:
        approval_id: ``ap-<12 hex>`` (:func:`~effectgate.contracts.approval_ids.approval_id_for` of the first request).
        request_id: the request that opened it.
        approvals_required: distinct entitled approvers who must approve (the quorum).
        approvers: the approvers entitled to answer when it opened (for chat mentions).
        votes: approvers whose approval counts, in vote order.
        joined: other requests (same principal, key and request hash) this approval answers.
        answered_by: who rejected it, or whose vote completed the quorum.
        related: other approvals of the same request hash (:class:`~effectgate.contracts.events.Related`).
        opened_at: when it was opened (UTC); ``None`` for one stored before this field existed.
        contents: what the call's file references named when it opened, as the executor
            read them (:mod:`effectgate.contracts.tools.contents`); bound into the grant.
        omitted: set in a listing only: what this item leaves out (``arguments``, ``joined``,
            ``related``), to keep a page within one message.
        arguments_bytes: set with ``arguments`` omitted: the size of their JSON, bytes.
    """

    approval_id: str
    request_id: str
    principal: str
    request_hash: str
    approver_role: str
    expires_at: datetime
    request: BoundRequest
    state: ApprovalState = ApprovalState.PENDING
    version_pinned: bool = False
    idempotency_key: str | None = None
    side_effect_class: SideEffectClass | None = None
    risk_tier: RiskTier | None = None
    policy_id: str | None = None
    approvals_required: int = 1
    approvers: tuple[str, ...] = ()
    votes: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()
    answered_by: str | None = None
    related: tuple[Related, ...] = ()
    opened_at: datetime | None = None
    contents: tuple[ContentState, ...] = ()
    omitted: tuple[str, ...] = ()
    arguments_bytes: int | None = None

    @property
    def request_ids(self) -> tuple[str, ...]:
        """Every request this approval answers: the one that opened it, then those that joined."""
        return (self.request_id, *self.joined)


Item = TypeVar("Item")
"""What a listing carries as an approval: :class:`PendingApproval` when read; the service
answers with each already encoded (:class:`msgspec.Raw`, to fill a page to its bound)."""


class DecideCommand(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.approvals.decide.<approver>``: approve (vote), reject, or withdraw one's vote.

    Attributes:
        approval_id: the approval.
        approve: ``true`` votes for it, ``false`` rejects it (unless ``withdraw``).
        note: a remark recorded with a rejection.
        withdraw: take back one's vote while the approval is pending (``approve`` must be ``false``).
    """

    approval_id: str
    approve: bool
    note: str = ""
    withdraw: bool = False


class DecideReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer to a :class:`DecideCommand`.

    Attributes:
        ok: the answer counts (or was given before: ``already_voted``, a replay).
        reason_code: ``voted``, ``granted``, ``rejected``, ``withdrawn``, ``already_voted``,
            ``not_voted``, or the refusal's code (:data:`APPROVAL_NOT_OPEN`: not open yet, answer
            again; ``unknown_approval``: nothing in the stream will ever open it).
        reason: human text.
        approval_id: the approval answered: the one named, or the approval its request
            joined (same principal, idempotency key and arguments).
        state: the approval's state after the answer.
        votes: approvers whose approval counts now.
        approvals_required: the quorum.
    """

    ok: bool
    reason_code: str
    reason: str
    approval_id: str | None = None
    state: ApprovalState | None = None
    votes: tuple[str, ...] = ()
    approvals_required: int | None = None


class WithdrawCode(StrEnum):
    """The reason codes of a :class:`WithdrawReply`."""

    WITHDRAWN = "withdrawn"
    """The approval was pending: it ended rejected; the request ends ``denied`` (``withdrawn``)."""
    NOT_PENDING = "not_pending"
    """No pending approval of this request for this principal: never opened, already
    granted, rejected, expired or withdrawn, or another principal's request (never told apart)."""
    NOT_OPEN = "not_open"
    """Transient: the request waits for its decision, or its approval opens in a moment; ask again."""
    MALFORMED = "malformed"
    """The body is not a :class:`WithdrawCommand`."""
    OVERSIZED = "oversized"
    """The body is larger than :data:`MAX_WITHDRAW_BYTES`."""
    INDEX_LOST = "index_lost"
    """Transient: the approvals index is being rebuilt from the stream; ask again."""
    STORE_UNAVAILABLE = "approval_store_unavailable"
    """Transient: the approval store cannot be reached; ask again."""


class WithdrawCommand(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.approvals.withdraw.<principal>``: withdraw one's own call while it awaits approval.

    The principal is the subject's last token (the transport's identity), never a field.

    Attributes:
        request_id: the request to withdraw (a subject token: 1 to 64 of ``A-Za-z0-9_-``).
    """

    request_id: Annotated[str, msgspec.Meta(pattern=TOKEN.pattern)]


class WithdrawReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer to a :class:`WithdrawCommand`.

    Attributes:
        ok: the call was withdrawn now (``withdrawn``).
        reason_code: a :class:`WithdrawCode` value.
        reason: human text.
        approval_id: the approval that ended, when ``ok``.
    """

    ok: bool
    reason_code: str
    reason: str
    approval_id: str | None = None


class StatusCode(StrEnum):
    """The reason codes of an :class:`ApprovalStatus`."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"
    NOT_OPEN = "not_open"
    """Transient: the request waits for its decision, or its approval opens in a moment; ask again."""
    NO_APPROVAL = "no_approval"
    """The request has no approval and will have none: it needs none, it ended, or no such
    request of this principal is in the stream (never told apart)."""
    MALFORMED = "malformed"
    OVERSIZED = "oversized"
    INDEX_LOST = "index_lost"
    """Transient: the approvals index is being rebuilt from the stream; ask again."""
    STORE_UNAVAILABLE = "approval_store_unavailable"
    """Transient: the approval store or the stream cannot be read; ask again."""


class ApprovalStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Answer of ``tg.approvals.status.<principal>`` (body: a :class:`WithdrawCommand`, ``{"request_id": …}``).

    Attributes:
        ok: ``reason_code`` is a state (``pending``, ``granted``, ``rejected``, ``expired``).
        reason_code: a :class:`StatusCode` value.
        reason: human text.
        approval_id: the approval the request waits on (or waited on): its own, or the one it
            joined (same principal, idempotency key and arguments); also given for ``not_open``.
        joined: the request joined another request's approval.
        votes: approvers whose approval counts now.
        approvals_required: the quorum.
        expires_at: when a pending approval expires (UTC).
    """

    ok: bool
    reason_code: str
    reason: str
    approval_id: str | None = None
    joined: bool = False
    votes: tuple[str, ...] = ()
    approvals_required: int | None = None
    expires_at: datetime | None = None


class ApprovalsPage(msgspec.Struct, Generic[Item], frozen=True, kw_only=True):
    """Answer of ``tg.approvals.list`` (body: a :class:`~effectgate.contracts.bus.paging.PageQuery`; empty: page 1).

    Read as ``ApprovalsPage[PendingApproval]``.

    Attributes:
        ok: the page was read (``found``); else ``malformed``, ``oversized``, ``index_lost``
            or ``approval_store_unavailable``.
        reason_code: ``found`` or the refusal's code.
        reason: human text.
        approvals: pending approvals, soonest expiry first; an item that leaves something
            out names it in ``omitted`` (``arguments``: their size is ``arguments_bytes``,
            ``tg.approvals.show`` gives them; ``joined``, ``related``).
        next: the cursor of the next page (``after``), ``None`` on the last page.
    """

    ok: bool
    reason_code: str
    reason: str
    approvals: list[Item] = msgspec.field(default_factory=list)
    next: str | None = None


class ShowQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.approvals.show``: one approval (or the id a request that joined it would have had)."""

    approval_id: Annotated[str, msgspec.Meta(max_length=64)]


class ApprovalShown(msgspec.Struct, Generic[Item], frozen=True, kw_only=True):
    """Answer of ``tg.approvals.show``, read as ``ApprovalShown[PendingApproval]``.

    Attributes:
        ok: the approval was found (in any state).
        reason_code: ``found``, ``unknown_approval``, ``malformed``, ``oversized``,
            ``index_lost`` or ``approval_store_unavailable``.
        reason: human text.
        approval: the approval with its arguments in full (a sealed secret as a label),
            unless they do not fit one message: then ``omitted`` names what was left out.
    """

    ok: bool
    reason_code: str
    reason: str
    approval: Item | None = None
