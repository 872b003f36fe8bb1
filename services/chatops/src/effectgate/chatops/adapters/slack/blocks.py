"""Slack Block Kit for approval cards, thread posts, replies and the reject dialog.

Inert by construction. Every string that came from an agent (arguments, ids, the idempotency
key, related lines) and every reason an approver typed goes into a ``rich_text`` ``text``
element or a ``plain_text`` object: Slack shows those literally and parses no mention, channel
link, URL link or formatting in them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    InputBlock,
    PlainTextInputElement,
    PlainTextObject,
    RichTextBlock,
    RichTextElement,
    RichTextElementParts,
    RichTextPreformattedElement,
    RichTextSectionElement,
)
from slack_sdk.models.views import View

from effectgate.chatops.domain import Card, CardState, thread_parts
from effectgate.contracts.chat_ids import SLACK_USER

__all__ = [
    "ANSWER_BLOCK",
    "APPROVE",
    "CARD_EVENT_TYPE",
    "REASON",
    "REJECT",
    "REJECT_VIEW",
    "SLACK_USER_ID",
    "card_blocks",
    "card_metadata",
    "card_text",
    "escape",
    "reject_view",
    "reply_blocks",
    "text_blocks",
]

SLACK_USER_ID = SLACK_USER
"""What a Slack user id looks like; any other mapped id is shown as a name, never mentioned."""

CARD_EVENT_TYPE = "effectgate_approval"
"""Message metadata ``event_type`` of a card (``find_card`` looks for it)."""

APPROVE, REJECT = "approve", "reject"
"""``action_id`` of the two buttons; their ``value`` is the approval id."""

ANSWER_BLOCK = "effectgate_answer"
"""``block_id`` of the buttons' block."""

REJECT_VIEW = "effectgate_reject"
"""``callback_id`` of the reject dialog."""

REASON = "reason"
"""``block_id`` and ``action_id`` of the reason input in the reject dialog."""

REASON_MAX_CHARS = 500
"""Longest reason the reject dialog accepts."""

_HEADERS = {
    CardState.PENDING: "Approval needed",
    CardState.GRANTED: "Approved",
    CardState.REJECTED: "Rejected",
    CardState.EXPIRED: "Expired",
}


def escape(text: str) -> str:
    """``text`` with the three characters Slack's mrkdwn gives meaning to escaped (``&``, ``<``, ``>``)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def card_blocks(card: Card, mentions: Mapping[str, str], part_chars: int) -> list[Block]:
    """The Block Kit blocks of ``card``.

    Args:
        card: what the card shows.
        mentions: approver name to Slack user id.
        part_chars: longest preformatted element of the arguments, characters.

    Returns:
        Header, warnings (if any), facts, arguments, files (if any), status, approvers, then the Approve /
        Reject buttons while the card is answerable (else a line saying answers are closed).
    """
    blocks: list[Block] = [HeaderBlock(text=PlainTextObject(text=f"{_HEADERS[card.state]}: {card.approval_id}"))]
    if card.warnings():
        blocks.append(_rich(_line(_bold("⚠ Check before approving"), *(_text(f"\n• {w}") for w in card.warnings()))))
    blocks.append(_rich(_line(*_facts(card))))
    arguments = (_pre(part) for part in thread_parts(card.arguments, part_chars))
    blocks.append(_rich(_line(_bold("Arguments")), *arguments))
    if card.contents:
        lines = (_text(f"\n• {line}") for line in card.contents)
        blocks.append(_rich(_line(_bold("Files (as the approval binds them)"), *lines)))
    blocks.append(_rich(_line(_bold("Status: "), _text(card.status_line()))))
    blocks.append(_rich(_line(_bold("Approvers: "), *_approvers(card.approvers, mentions))))
    blocks.append(_answers(card))
    return blocks


def card_text(card: Card, mentions: Mapping[str, str]) -> str:
    """The card's notification text (mrkdwn): no agent text, only our ids and the approvers' mentions."""
    ids = (mentions.get(name, "") for name in card.approvers)
    notify = " ".join(f"<@{user}>" for user in ids if SLACK_USER_ID.match(user))
    state = _HEADERS[card.state].lower()
    return escape(f"Tool call approval {card.approval_id} ({card.side_effect_class}): {state}") + (
        f" {notify}" if notify and card.answerable else ""
    )


def card_metadata(approval_id: str) -> dict[str, object]:
    """Message metadata marking a card as the card of ``approval_id``."""
    return {"event_type": CARD_EVENT_TYPE, "event_payload": {"approval_id": approval_id}}


def text_blocks(text: str) -> list[Block]:
    """``text`` as one preformatted block (a thread post: shown literally)."""
    return [_rich(_pre(text))]


def reply_blocks(user: str, text: str) -> list[Block]:
    """A reply to ``user``: their mention (when ``user`` is a Slack user id), then ``text`` literally."""
    head: list[RichTextElement] = [RichTextElementParts.User(user_id=user)] if SLACK_USER_ID.match(user) else []
    return [_rich(_line(*head, _text(f" {text}" if head else text)))]


def reject_view(approval_id: str, channel: str, message_ts: str) -> View:
    """The dialog a Reject click opens: an optional reason, then Reject or Cancel.

    The card it came from rides in ``private_metadata`` as JSON
    ``{"approval_id", "channel", "message_ts"}``.
    """
    reason = PlainTextInputElement(action_id=REASON, multiline=True, max_length=REASON_MAX_CHARS)
    return View(
        type="modal",
        callback_id=REJECT_VIEW,
        title=PlainTextObject(text="Reject tool call"),
        submit=PlainTextObject(text="Reject"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=json.dumps({"approval_id": approval_id, "channel": channel, "message_ts": message_ts}),
        blocks=[
            _rich(_line(_text(f"Reject {approval_id}? The call will not run."))),
            InputBlock(block_id=REASON, label=PlainTextObject(text="Reason"), element=reason, optional=True),
        ],
    )


def _facts(card: Card) -> Iterable[RichTextElement]:
    expires = card.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    quorum = f" ({card.approvals_required} approvals needed)" if card.approvals_required > 1 else ""
    facts = (
        ("Principal", card.principal),
        ("Call", card.call),
        ("Side effect", f"{card.side_effect_class}, risk {card.risk_tier}"),
        ("Policy", card.policy_id),
        ("Approver role", card.approver_role + quorum),
        ("Idempotency key", card.idempotency_key or "(none)"),
        ("Request hash", card.request_hash12),
        ("Requests", ", ".join(card.request_ids)),
        ("Expires", expires),
    )
    for number, (label, value) in enumerate(facts):
        yield _bold(f"{chr(10) if number else ''}{label}: ")
        yield _text(value or "(none)")


def _approvers(names: Iterable[str], mentions: Mapping[str, str]) -> Iterable[RichTextElement]:
    for number, name in enumerate(names):
        if number:
            yield _text(", ")
        user = mentions.get(name, "")
        if SLACK_USER_ID.match(user):
            yield RichTextElementParts.User(user_id=user)
        else:
            yield _text(f"{name} (no Slack user mapped)")


def _answers(card: Card) -> Block:
    if not card.answerable:
        return ContextBlock(elements=[PlainTextObject(text="Answers are closed.")])
    confirm = ConfirmObject(
        title="Approve this call?",
        text=PlainTextObject(text=f"Approving {card.approval_id} lets the call run as shown on the card."),
        confirm="Approve",
        deny="Cancel",
    )
    return ActionsBlock(
        block_id=ANSWER_BLOCK,
        elements=[
            ButtonElement(text="Approve", action_id=APPROVE, value=card.approval_id, style="primary", confirm=confirm),
            ButtonElement(text="Reject", action_id=REJECT, value=card.approval_id, style="danger"),
        ],
    )


def _rich(*elements: RichTextElement) -> RichTextBlock:
    return RichTextBlock(elements=list(elements))


def _line(*parts: RichTextElement) -> RichTextSectionElement:
    return RichTextSectionElement(elements=list(parts))


def _pre(text: str) -> RichTextPreformattedElement:
    return RichTextPreformattedElement(elements=[_text(text or " ")])


def _text(text: str) -> RichTextElement:
    return RichTextElementParts.Text(text=text)


def _bold(text: str) -> RichTextElement:
    return RichTextElementParts.Text(text=text, style={"bold": True})
