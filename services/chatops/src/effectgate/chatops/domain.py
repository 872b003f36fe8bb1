"""Pure rules of the chat-ops bot: what an approval card says (what a chat answer means: :mod:`.answers`).

A card is a view over the durable approval record held by the approvals service, never the
record itself: it is built from the signed approval events on the stream and edited as they
arrive.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import msgspec

from effectgate.chatops.folding import Folded, shown_arguments, visible
from effectgate.contracts.approval_ids import APPROVAL_ID
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    ReceiptIssued,
    Related,
)
from effectgate.contracts.replays import ended_as, outcome_label
from effectgate.contracts.rpc.approvals import APPROVAL_NOT_OPEN, PendingApproval
from effectgate.contracts.tools.contents import content_lines
from effectgate.contracts.tools.secret_arguments import redact_sealed
from effectgate.contracts.vocabulary import Outcome

__all__ = [
    "APPROVAL_ID",
    "Card",
    "CardRecord",
    "CardState",
    "Folded",
    "card_for",
    "outcome_text",
    "reply_text",
    "thread_parts",
    "updated_card",
]


class CardState(StrEnum):
    """What the card says about its approval."""

    PENDING = "pending"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"


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
            (:func:`~effectgate.contracts.tools.contents.content_lines`); ``()``: it names no file.
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


_LISTING_ONLY = ("votes", "joined", "omitted", "arguments_bytes")


def listed_card(listed: PendingApproval, fold_chars: int) -> Card:
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
    size, shown_by = listed.arguments_bytes, f"effectgate approvals show {listed.approval_id}"
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
    names the request that ran (:mod:`effectgate.contracts.replays`).
    """
    line = f"request {receipt.request_id}: {outcome_label(receipt)} ({receipt.reason_code}); {receipt.event_id}"
    if receipt.replay_of:
        line += f", replay of {receipt.replay_of}: the tool did not run again"
    if ended_as(receipt) is Outcome.UNCERTAIN:
        line += ". The effect may have happened: do not re-run it blindly; reconcile first."
    return line


def updated_card(card: Card, event: ApprovalVoted | ApprovalGranted | ApprovalRejected) -> Card:
    """``card`` as it stands after ``event`` (a final state is never changed again)."""
    if card.state is not CardState.PENDING:
        return card
    if isinstance(event, ApprovalVoted):
        return msgspec.structs.replace(card, votes=event.votes)
    if isinstance(event, ApprovalGranted):
        voters = event.approvers or (event.approver,)
        return msgspec.structs.replace(card, state=CardState.GRANTED, votes=voters, answered_by=voters)
    state = CardState.EXPIRED if event.reason_code == "approval_expired" else CardState.REJECTED
    by = (event.approver,) if event.approver else ()
    return msgspec.structs.replace(card, state=state, answered_by=by, reason=event.reason)


def reply_text(approver: str, approval_id: str, reply: dict[str, object]) -> str:
    """What the bot tells an approver after the approvals service answered ``reply`` to their answer."""
    reason = str(reply.get("reason") or reply.get("reason_code") or "")
    if reply.get("ok"):
        said = reason if approval_id in reason else f"{approval_id}: {reason}"
        return f"{said} (as approver {approver})"
    if reply.get("reason_code") == APPROVAL_NOT_OPEN:
        return f"{approval_id} is not open yet ({reason}): nothing changed; answer again in a moment."
    return f"{approval_id}: refused ({reply.get('reason_code')}): {reason}. Nothing changed."
