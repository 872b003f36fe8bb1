"""Pure rules of the chat-ops bot: what an approval card says, and what a chat answer means.

A card is a view over the durable approval record held by the approvals service, never
the record itself: it is built from the signed approval events on the stream and edited
as they arrive. The card is platform-neutral here; each adapter renders it (Matrix HTML,
Slack Block Kit) and is responsible for escaping: every string that came from the agent
(arguments, ids, the idempotency key) is data, shown inertly.

How the arguments are shown (canonical, pretty, inert, folded, never cut) is
:mod:`toolgate.chatops.folding`.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum

import msgspec

from toolgate.chatops.folding import Folded, shown_arguments, visible
from toolgate.contracts.approval_ids import APPROVAL_ID
from toolgate.contracts.contents import ContentState, content_lines
from toolgate.contracts.events import ApprovalRequested, BoundRequest, ReceiptIssued, Related
from toolgate.contracts.replays import ended_as, outcome_label
from toolgate.contracts.secret_arguments import redact_sealed
from toolgate.contracts.vocabulary import Outcome

__all__ = [
    "APPROVAL_ID",
    "Action",
    "Card",
    "CardRecord",
    "CardState",
    "ChatAnswer",
    "Folded",
    "ListedApproval",
    "command_of",
    "card_for",
    "outcome_text",
    "reaction_action",
    "thread_parts",
]


class CardState(StrEnum):
    """What the card says about its approval."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"


class Action(StrEnum):
    """What an approver asked for in chat."""

    APPROVE = "approve"
    REJECT = "reject"
    WITHDRAW = "withdraw"


class Card(msgspec.Struct, frozen=True, kw_only=True):
    """Everything an approval card shows (platform-neutral).

    Attributes:
        approval_id: ``ap-<12 hex>``.
        request_ids: the requests this approval answers (one, or more that joined it).
        principal: the requesting principal.
        call: ``tool@version.operation``.
        side_effect_class: e.g. ``irreversible_write``.
        risk_tier: e.g. ``high``.
        policy_id: the ``@id`` of the policy that asked for approval.
        approver_role: the role entitled to answer.
        approvers: entitled approver names (adapters mention their chat ids).
        approvals_required: the quorum.
        idempotency_key: the request's key.
        request_hash12: first 12 hex of the request hash.
        expires_at: when the approval expires, UTC.
        arguments: canonical JSON of the arguments, pretty-printed, long strings folded.
        folded: the folded values, in marker order.
        related: other approvals of the same call (same request hash).
        contents: one line per file reference the call names: what it named when the
            approval opened and whether that content is bound or the reference only
            (:func:`~toolgate.contracts.contents.content_lines`); ``()``: it names no file.
        state: what became of the approval.
        votes: approvers whose approval counts so far.
        answered_by: who granted or rejected (empty while pending or when expired).
        reason: a rejection's reason.
    """

    approval_id: str
    request_ids: tuple[str, ...]
    principal: str
    call: str
    side_effect_class: str
    risk_tier: str
    policy_id: str
    approver_role: str
    approvers: tuple[str, ...]
    approvals_required: int
    idempotency_key: str
    request_hash12: str
    expires_at: datetime
    arguments: str
    folded: tuple[Folded, ...] = ()
    related: tuple[Related, ...] = ()
    contents: tuple[str, ...] = ()
    state: CardState = CardState.PENDING
    votes: tuple[str, ...] = ()
    answered_by: tuple[str, ...] = ()
    reason: str = ""

    @property
    def answerable(self) -> bool:
        """Whether buttons and reactions still mean something."""
        return self.state is CardState.PENDING

    def status_line(self) -> str:
        """One line saying where the approval stands, e.g. ``approved by alice, bob``."""
        if self.state is CardState.GRANTED:
            return f"approved by {', '.join(self.answered_by)}"
        if self.state is CardState.REJECTED:
            who = f" by {', '.join(self.answered_by)}" if self.answered_by else ""
            if self.reason.startswith("rejected"):
                return self.reason  # the approvals service's own wording already names who
            return f"rejected{who}: {self.reason}" if self.reason else f"rejected{who}"
        if self.state is CardState.EXPIRED:
            return "expired unanswered"
        if self.approvals_required > 1:
            voters = f" ({', '.join(self.votes)})" if self.votes else ""
            return f"pending: {len(self.votes)} of {self.approvals_required} approvals{voters}"
        return "pending"

    def warnings(self) -> tuple[str, ...]:
        """Lines that stop an approver from granting a second effect by accident."""
        return tuple(_related_line(item) for item in self.related)


class CardRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What the bot keeps per approval card (in its cards bucket, keyed by approval id).

    Attributes:
        card: what the card shows now.
        room: the room or channel it was posted in.
        message_id: the card's message (Matrix event id, Slack ``ts``); ``""`` while posting.
        outcomes: request ids whose receipt was already posted in the thread.
        folded_posted: the folded values are in the thread.
        refused: why chat refused the card for good (the re-sync tries again later); ``""`` if not.
    """

    card: Card
    room: str
    message_id: str = ""
    outcomes: tuple[str, ...] = ()
    folded_posted: bool = False
    refused: str = ""


class ChatAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """An approver's answer as the chat adapter saw it.

    Attributes:
        platform: ``matrix`` or ``slack``.
        chat_user: the platform's user id (``@alice:example.org``, ``U0123ABC``).
        action: what was asked.
        approval_id: the approval, when the answer named it (a command) or the adapter
            found it (a reaction on, or a button of, a known card); ``None`` otherwise.
        room: where the answer was given.
        message_id: the card (or message) the answer refers to, ``""`` if none.
        note: a rejection's reason.
    """

    platform: str
    chat_user: str
    action: Action
    approval_id: str | None
    room: str
    message_id: str = ""
    note: str = ""


class ListedApproval(msgspec.Struct, frozen=True, kw_only=True):
    """A pending approval as ``tg.approvals.list`` answers it (the fields a card needs).

    The answer comes from the approvals service over the bot's private reply inbox, which
    only that service may publish to: the re-sync builds cards from it, never from
    messages read back from the stream. ``omitted`` names what the listing left out
    (``arguments``: their size is ``arguments_bytes``), when even ``tg.approvals.show``
    could not carry them.
    """

    approval_id: str
    request_id: str
    principal: str
    request_hash: str
    approver_role: str
    expires_at: datetime
    request: BoundRequest
    idempotency_key: str | None = None
    side_effect_class: str | None = None
    risk_tier: str | None = None
    policy_id: str | None = None
    approvals_required: int = 1
    approvers: tuple[str, ...] = ()
    votes: tuple[str, ...] = ()
    joined: tuple[str, ...] = ()
    related: tuple[Related, ...] = ()
    contents: tuple[ContentState, ...] = ()
    omitted: tuple[str, ...] = ()
    arguments_bytes: int | None = None


_LISTING_ONLY = ("votes", "joined", "omitted", "arguments_bytes")


def listed_card(listed: ListedApproval, fold_chars: int) -> Card:
    """The card of an approval found pending at re-sync: with its votes and joined requests.

    Arguments the listing left out are never shown as empty: the card says how large they
    are and where to read them.
    """
    fields = {f: getattr(listed, f) for f in listed.__struct_fields__ if f not in _LISTING_ONLY}
    header = {
        "type": "approval.requested",
        "event_id": f"listed:{listed.approval_id}",
        "occurred_at": listed.expires_at,
    }
    event = msgspec.convert({**fields, **header}, ApprovalRequested, from_attributes=True)
    card = card_for(event, fold_chars)
    card = msgspec.structs.replace(card, request_ids=(listed.request_id, *listed.joined), votes=listed.votes)
    if "arguments" not in listed.omitted:
        return card
    size, shown_by = listed.arguments_bytes, f"toolgate approvals show {listed.approval_id}"
    notice = f"(arguments of {size} bytes, too large for one message: {shown_by})"
    return msgspec.structs.replace(card, arguments=notice, folded=())


def card_for(event: ApprovalRequested, fold_chars: int) -> Card:
    """The card of a newly requested approval.

    Args:
        event: the approvals service's :class:`ApprovalRequested`.
        fold_chars: strings longer than this are folded into the thread.
    """
    request = event.request
    arguments, folded = shown_arguments(redact_sealed(request.arguments), fold_chars)
    return Card(
        approval_id=event.approval_id,
        request_ids=(event.request_id,),
        principal=event.principal,
        call=f"{request.tool}@{request.version}.{request.operation}",
        side_effect_class=str(event.side_effect_class or "unknown"),
        risk_tier=str(event.risk_tier or "unknown"),
        policy_id=event.policy_id or "unknown",
        approver_role=event.approver_role,
        approvers=event.approvers,
        approvals_required=event.approvals_required,
        idempotency_key=visible(event.idempotency_key or ""),
        request_hash12=event.request_hash.removeprefix("sha256:")[:12],
        expires_at=event.expires_at,
        arguments=arguments,
        folded=folded,
        related=event.related,
        contents=tuple(visible(line) for line in content_lines(event.contents)),
    )


def _related_line(item: Related) -> str:
    if item.same_key:
        head = f"the same call under the same idempotency key is {item.state} as {item.approval_id}"
        tail = "; approving this one runs nothing new"
    else:
        head = f"an identical call under another idempotency key is {item.state} as {item.approval_id}"
        tail = "; approving this one runs it again"
    if item.outcome:
        head += f", receipt {item.receipt_id}: {item.outcome}"
    return head + tail


def thread_parts(text: str, part_chars: int) -> list[str]:
    """``text`` cut into parts of at most ``part_chars`` characters, in order (nothing dropped)."""
    if part_chars < 1:
        raise ValueError("part_chars must be positive")
    return [text[i : i + part_chars] for i in range(0, len(text), part_chars)] or [""]


def outcome_text(receipt: ReceiptIssued) -> str:
    """The line posted in a card's thread when one of its requests ends.

    A replay reads as the stored outcome it carries (``replayed failed (tool_error)``) and
    names the request that ran (:mod:`toolgate.contracts.replays`).
    """
    line = f"request {receipt.request_id}: {outcome_label(receipt)} ({receipt.reason_code}); {receipt.event_id}"
    if receipt.replay_of:
        line += f", replay of {receipt.replay_of}: the tool did not run again"
    if ended_as(receipt) is Outcome.UNCERTAIN:
        line += ". The effect may have happened: do not re-run it blindly; reconcile first."
    return line


_COMMAND = re.compile(r"^\s*(?:!|/toolgate\s+)(approve|reject|withdraw)\b\s*(\S*)\s*(.*)\Z", re.DOTALL)


def command_of(text: str) -> tuple[Action, str, str] | None:
    """Parse ``!approve ap-…``, ``!reject ap-… reason`` (Matrix) or ``/toolgate approve ap-…`` (Slack).

    Returns:
        ``(action, approval_id, note)``, or ``None`` when the text is not a command at all
        (the bot stays silent on ordinary messages). The approval id is returned as given:
        the caller refuses one that does not match :data:`~toolgate.contracts.approval_ids.APPROVAL_ID`.
    """
    match = _COMMAND.match(text)
    if match is None:
        return None
    action, approval_id, note = match.groups()
    return Action(action), approval_id, note.strip()


_REACTIONS = {"✅": Action.APPROVE, "❌": Action.REJECT}


def reaction_action(key: str) -> Action | None:
    """What a reaction means: ✅ approve, ❌ reject (a variation selector ignored); any other, ``None``.

    Only these two count: a casual 👍 ("seen") must never approve anything.
    """
    return _REACTIONS.get(key.replace("\ufe0f", "").strip())
