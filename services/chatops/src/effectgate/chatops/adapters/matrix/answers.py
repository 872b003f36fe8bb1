"""What the Matrix events of a room mean as approver answers, and where the bot's sync stands."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import msgspec

from effectgate.chatops.answers import Action, ChatAnswer, command_of, reaction_action

__all__ = ["Reaction", "SyncState", "answer_of"]

log = logging.getLogger("effectgate.chatops.matrix")

STATE_FILE = "matrix-sync.json"
"""Name of the state file in the state directory."""


class Reaction(msgspec.Struct, frozen=True, array_like=True):
    """A ✅/❌ reaction the bot saw: who reacted, with what, to which message in which room."""

    room: str
    target: str
    sender: str
    action: Action


class _Saved(msgspec.Struct):
    since: str | None = None
    reactions: list[tuple[str, Reaction]] = msgspec.field(default_factory=list)


class SyncState:
    """The sync position and the last ``keep`` reactions, in ``<state_dir>/matrix-sync.json`` (or memory only).

    Args:
        state_dir: where the file lives; ``None`` keeps nothing across restarts.
        keep: reactions remembered (the oldest are forgotten first).
    """

    def __init__(self, state_dir: Path | None, keep: int = 5000) -> None:
        self.path = state_dir / STATE_FILE if state_dir else None
        self.keep = keep
        self.since: str | None = None
        self.reactions: OrderedDict[str, Reaction] = OrderedDict()
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            saved = msgspec.json.decode(self.path.read_bytes(), type=_Saved)
        except (OSError, msgspec.DecodeError) as error:
            log.warning("matrix sync state %s unreadable (%s): starting from now", self.path, error)
            return
        self.since, self.reactions = saved.since, OrderedDict(saved.reactions)

    def save(self) -> None:
        """Write the state atomically (a temporary file renamed over the old one)."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_bytes(msgspec.json.encode(_Saved(self.since, list(self.reactions.items()))))
        os.replace(temporary, self.path)

    def remember(self, event_id: str, reaction: Reaction) -> None:
        """Keep ``reaction`` (event ``event_id``) so that its redaction can be matched."""
        self.reactions[event_id] = reaction
        while len(self.reactions) > self.keep:
            self.reactions.popitem(last=False)


def answer_of(room: str, event: dict[str, Any], me: str, state: SyncState) -> ChatAnswer | None:
    """The answer ``event`` (a room event's JSON) gives, or ``None`` when it gives none.

    Args:
        room: the room id the event is in.
        event: the event as the homeserver sent it.
        me: the bot's user id (its own events are never answers).
        state: remembers reactions; a redaction is matched against it.
    """
    sender, kind, content = event.get("sender"), event.get("type"), event.get("content")
    if not isinstance(sender, str) or sender == me or not isinstance(content, dict):
        return None
    if kind == "m.reaction":
        return _reaction(room, event, sender, content, state)
    if kind == "m.room.redaction":
        return _redaction(room, event, sender, content, state)
    if kind == "m.room.message":
        return _command(room, event, sender, content)
    return None


def _reaction(
    room: str, event: dict[str, Any], sender: str, content: dict[str, Any], state: SyncState
) -> ChatAnswer | None:
    relation = content.get("m.relates_to")
    if not isinstance(relation, dict) or relation.get("rel_type") != "m.annotation":
        return None
    target, key, event_id = relation.get("event_id"), relation.get("key"), event.get("event_id")
    if not (isinstance(target, str) and isinstance(key, str) and isinstance(event_id, str)):
        return None
    action = reaction_action(key)
    if action is None:
        return None
    state.remember(event_id, Reaction(room, target, sender, action))
    return ChatAnswer(
        platform="matrix", chat_user=sender, action=action, approval_id=None, room=room, message_id=target
    )


def _redaction(
    room: str, event: dict[str, Any], sender: str, content: dict[str, Any], state: SyncState
) -> ChatAnswer | None:
    redacts = event.get("redacts") or content.get("redacts")  # top level before room version 11, content after
    reaction = state.reactions.pop(redacts, None) if isinstance(redacts, str) else None
    if reaction is None or reaction.action is not Action.APPROVE or reaction.sender != sender or reaction.room != room:
        return None  # only the approver's own removal of their ✅ withdraws it
    return ChatAnswer(
        platform="matrix",
        chat_user=sender,
        action=Action.WITHDRAW,
        approval_id=None,
        room=room,
        message_id=reaction.target,
    )


def _command(room: str, event: dict[str, Any], sender: str, content: dict[str, Any]) -> ChatAnswer | None:
    body, relation, event_id = content.get("body"), content.get("m.relates_to"), event.get("event_id")
    if content.get("msgtype") != "m.text" or not isinstance(body, str) or not isinstance(event_id, str):
        return None
    relation = relation if isinstance(relation, dict) else {}
    if relation.get("rel_type") == "m.replace":
        return None  # an edit: the command was read when it was sent
    parsed = command_of(_without_reply_fallback(body))
    if parsed is None:
        return None
    action, approval_id, note = parsed
    root = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
    return ChatAnswer(
        platform="matrix",
        chat_user=sender,
        action=action,
        approval_id=approval_id,
        room=room,
        message_id=root if isinstance(root, str) else event_id,
        note=note,
    )


def _without_reply_fallback(body: str) -> str:
    """``body`` without the quoted ``> <@user> …`` lines a rich reply may start with."""
    lines = body.splitlines()
    if not lines or not lines[0].startswith("> "):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).lstrip("\n")
