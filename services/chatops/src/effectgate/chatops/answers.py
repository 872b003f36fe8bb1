"""What an approver's answer in chat means (pure): a command or a reaction, as an :class:`Action`.

A command names its approval (``!approve ap-…``, ``/effectgate reject ap-… reason``); a
reaction counts only on a known card and only as ✅ or ❌. Each chat adapter turns what its
platform delivered into a :class:`ChatAnswer` with these rules.
"""

from __future__ import annotations

import re
from enum import StrEnum

import msgspec

__all__ = ["Action", "ChatAnswer", "command_of", "reaction_action"]


class Action(StrEnum):
    """What an approver asked for in chat."""

    APPROVE = "approve"
    REJECT = "reject"
    WITHDRAW = "withdraw"


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


_COMMAND = re.compile(r"^\s*(?:!|/effectgate\s+)(approve|reject|withdraw)\b\s*(\S*)\s*(.*)\Z", re.DOTALL)


def command_of(text: str) -> tuple[Action, str, str] | None:
    """Parse ``!approve ap-…``, ``!reject ap-… reason`` (Matrix) or ``/effectgate approve ap-…`` (Slack).

    Returns:
        ``(action, approval_id, note)``, or ``None`` when the text is not a command at all
        (the bot stays silent on ordinary messages). The approval id is returned as given:
        the caller refuses one that does not match :data:`~effectgate.contracts.approval_ids.APPROVAL_ID`.
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
