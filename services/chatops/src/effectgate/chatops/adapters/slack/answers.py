"""What a Slack interaction means: a button click, the reject dialog's submission, a slash command.

Bolt has already verified the request's signature; these functions only read its body, and
return ``None`` for a body that does not have the shape they need (it is logged and dropped,
never raised out of the receive path).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from effectgate.chatops.adapters.slack.blocks import APPROVE, REASON, REJECT
from effectgate.chatops.answers import Action, ChatAnswer, command_of
from effectgate.chatops.domain import APPROVAL_ID

__all__ = ["PLATFORM", "ClickedCard", "click_of", "command_answer", "rejection_answer"]

PLATFORM = "slack"


class _Id(msgspec.Struct):
    id: str


class _Container(msgspec.Struct):
    message_ts: str = ""


class _Button(msgspec.Struct):
    action_id: str
    value: str = ""


class _BlockActions(msgspec.Struct):
    user: _Id
    channel: _Id
    container: _Container
    actions: list[_Button]
    trigger_id: str = ""


class _Command(msgspec.Struct):
    user_id: str
    channel_id: str
    text: str = ""


class _Input(msgspec.Struct):
    value: str | None = None


class _State(msgspec.Struct):
    values: dict[str, dict[str, _Input]] = {}


class _View(msgspec.Struct):
    private_metadata: str
    state: _State = msgspec.field(default_factory=_State)


class _Submission(msgspec.Struct):
    user: _Id
    view: _View


class _CardRef(msgspec.Struct):
    approval_id: str
    channel: str
    message_ts: str


class ClickedCard(msgspec.Struct, frozen=True, kw_only=True):
    """A click on a card's button.

    Attributes:
        answer: the answer the click gives.
        trigger_id: Slack's trigger id (opens a dialog within 3 s of the click).
    """

    answer: ChatAnswer
    trigger_id: str


_ACTIONS = {APPROVE: Action.APPROVE, REJECT: Action.REJECT}


def click_of(body: Mapping[str, Any]) -> ClickedCard | None:
    """The answer of a ``block_actions`` body whose first action is an Approve or Reject button.

    Returns:
        The click, with ``message_id`` = the card's ``ts`` and ``room`` = the channel id; ``None``
        when the body lacks the user, channel, message or action, or the action is another one.
    """
    try:
        payload = msgspec.convert(body, _BlockActions)
    except msgspec.ValidationError:
        return None
    if not payload.actions or payload.actions[0].action_id not in _ACTIONS:
        return None
    button = payload.actions[0]
    answer = ChatAnswer(
        platform=PLATFORM,
        chat_user=payload.user.id,
        action=_ACTIONS[button.action_id],
        approval_id=button.value,
        room=payload.channel.id,
        message_id=payload.container.message_ts,
    )
    return ClickedCard(answer=answer, trigger_id=payload.trigger_id)


def command_answer(command: Mapping[str, Any]) -> ChatAnswer | None:
    """The answer of ``/effectgate approve|reject|withdraw ap-… [reason]``.

    Returns:
        The answer (``message_id`` ``""``: replies go to the user alone), or ``None`` when the
        text is not such a command, names no approval id (``ap-`` and 12 hex digits) or the
        body lacks the user or channel (the user is shown the usage).
    """
    try:
        payload = msgspec.convert(command, _Command)
    except msgspec.ValidationError:
        return None
    parsed = command_of(f"/effectgate {payload.text}")
    if parsed is None or not APPROVAL_ID.match(parsed[1]):
        return None
    action, approval_id, note = parsed
    return ChatAnswer(
        platform=PLATFORM,
        chat_user=payload.user_id,
        action=action,
        approval_id=approval_id,
        room=payload.channel_id,
        note=note,
    )


def rejection_answer(body: Mapping[str, Any]) -> ChatAnswer | None:
    """The REJECT answer of a submitted reject dialog (see ``slack_blocks.reject_view``).

    Returns:
        The answer for the card the dialog was opened from, with the typed reason as ``note``;
        ``None`` when the body or its ``private_metadata`` do not have that shape.
    """
    try:
        payload = msgspec.convert(body, _Submission)
        card = msgspec.convert(json.loads(payload.view.private_metadata), _CardRef)
    except (msgspec.ValidationError, ValueError):
        return None
    reason = payload.view.state.values.get(REASON, {}).get(REASON, _Input()).value or ""
    return ChatAnswer(
        platform=PLATFORM,
        chat_user=payload.user.id,
        action=Action.REJECT,
        approval_id=card.approval_id,
        room=card.channel,
        message_id=card.message_ts,
        note=reason.strip(),
    )
