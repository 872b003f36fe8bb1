"""The Matrix chat platform: approval cards in rooms, answers from reactions, redactions and commands.

Built on matrix-nio's :class:`~nio.AsyncClient` (unencrypted rooms), reached through
:class:`~.homeserver.Homeserver` (the login, the joined rooms, every failure mapped).

Answers are read by a sync loop started by :meth:`MatrixChat.start`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nio import MessageDirection, SyncResponse

from effectgate.chatops.adapters.matrix.answers import SyncState, answer_of
from effectgate.chatops.adapters.matrix.card import CARD_KEY, card_content, edit_content, thread_content
from effectgate.chatops.adapters.matrix.homeserver import Homeserver
from effectgate.chatops.answers import ChatAnswer
from effectgate.chatops.domain import Card
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.ports import AnswerSink

__all__ = ["MatrixChat"]

log = logging.getLogger("effectgate.chatops.matrix")

_TIMELINE: dict[str, Any] = {"types": ["m.reaction", "m.room.redaction", "m.room.message"], "limit": 100}
_SYNC_FILTER: dict[str, Any] = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {"timeline": _TIMELINE, "state": {"lazy_load_members": True}, "ephemeral": {"not_types": ["*"]}},
}
_GAP_EVENTS = 2000
"""Most skipped events fetched per room after a cut timeline."""


class MatrixChat:
    """:class:`~effectgate.chatops.ports.ChatPort` on a Matrix homeserver.

    Args:
        homeserver: the homeserver URL, ``https://matrix.example.org``.
        user_id: the bot's user id, ``@bot:example.org``.
        password: the bot's password.
        device_id: the bot's fixed device id.
        rooms: room ids the bot belongs in (it joins them, and accepts invites to them only).
        mentions: approver name -> Matrix user id; a card mentions its entitled approvers found here.
        state_dir: where the sync position is kept across restarts; ``None``: start from now.
        poll_timeout_s: how long one sync waits for new events, seconds.
        request_timeout_s: how long any other request may take, seconds.
        max_backoff_s: longest wait of the sync loop between failed attempts, seconds.
    """

    platform = "matrix"

    def __init__(
        self,
        homeserver: str,
        user_id: str,
        password: str,
        device_id: str,
        rooms: Iterable[str],
        mentions: Mapping[str, str],
        state_dir: Path | None = None,
        poll_timeout_s: float = 25.0,
        request_timeout_s: float = 10.0,
        max_backoff_s: float = 10.0,
    ) -> None:
        self.server = Homeserver(homeserver, user_id, password, device_id, request_timeout_s)
        self.client, self.user_id = self.server.client, user_id
        self.rooms, self.mentions = frozenset(rooms), dict(mentions)
        self.state = SyncState(state_dir)
        self.poll_timeout_s, self.max_backoff_s = poll_timeout_s, max_backoff_s
        self._task: asyncio.Task[None] | None = None

    async def post_card(self, room: str, card: Card, txn_id: str) -> str:
        """See :meth:`ChatPort.post_card`; the homeserver stores one card per ``txn_id``."""
        return await self.server.send(room, card_content(card, self.mentions), txn_id, "post the card")

    async def find_card(self, room: str, approval_id: str, pages: int = 3) -> str | None:
        """See :meth:`ChatPort.find_card`: the bot's last ``pages`` × 100 messages in ``room`` are searched."""
        await self.server.ready(room)
        messages_filter = {"senders": [self.user_id], "types": ["m.room.message"]}
        start: str | None = None
        for _ in range(pages):
            page = await self.server.call(
                "read the room",
                self.client.room_messages(room, start, None, MessageDirection.back, 100, messages_filter),
            )
            for event in page.chunk:
                if _card_of(event.source) == approval_id:
                    return str(event.event_id)
            if not page.chunk or not page.end:
                return None
            start = page.end
        return None

    async def edit_card(self, room: str, message_id: str, card: Card) -> None:
        """See :meth:`ChatPort.edit_card`.

        Each edit gets a transaction id of its own: an edit back to an earlier content (a vote,
        a withdrawal, the vote again) must be shown, and the latest edit is the card's content.
        """
        content = edit_content(message_id, card, self.mentions)
        await self.server.send(room, content, f"edit-{uuid.uuid4().hex}", "edit the card")

    async def post_in_thread(self, room: str, message_id: str, text: str, txn_id: str) -> None:
        """See :meth:`ChatPort.post_in_thread`."""
        await self.server.send(room, thread_content(message_id, text), txn_id, "post in the thread")

    async def reply(self, answer: ChatAnswer, text: str) -> None:
        """See :meth:`ChatPort.reply`: in the thread of the card (or command) answered, mentioning the approver."""
        content = thread_content(answer.message_id, text, (answer.chat_user,), preformatted=False)
        if not answer.message_id:
            del content["m.relates_to"]
        await self.server.send(answer.room, content, None, "reply")

    async def start(self, answers: AnswerSink) -> None:
        """See :meth:`ChatPort.start`: the sync loop runs in a task until :meth:`stop`.

        Raises:
            ChatRefused: the homeserver refused the bot's login (a wrong user or password
                does not mend itself: the bot stops at start). An unreachable homeserver
                only delays the login.
        """
        with contextlib.suppress(ChatUnavailable):
            await self.server.login()
        if self._task is None:
            self._task = asyncio.create_task(self._sync_forever(answers), name="matrix-sync")

    async def stop(self) -> None:
        """See :meth:`ChatPort.stop`."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.client.close()

    async def _sync_forever(self, answers: AnswerSink) -> None:
        failures = 0
        while True:
            try:
                await self._sync_once(answers)
                failures = 0
            except Exception as error:  # the receive loop never ends on an error: it waits, then tries again
                failures += 1
                delay = min(0.25 * 2**failures, self.max_backoff_s)
                log.warning("matrix sync failed (%s); again in %.1f s", getattr(error, "reason", repr(error)), delay)
                await asyncio.sleep(delay)

    async def _sync_once(self, answers: AnswerSink) -> None:
        await self.server.login()
        since = self.state.since
        timeout_ms = int(self.poll_timeout_s * 1000) if since else 1
        sync = self.client.sync(timeout_ms, _SYNC_FILTER if since else _first_sync_filter(), since)
        response: SyncResponse = await self.server.call("sync", sync)
        await self._accept_invites(response)
        if since:  # the first sync only finds where "now" is
            for room, joined in response.rooms.join.items():
                events = await self._skipped(room, joined.timeline, since)
                events += [event.source for event in joined.timeline.events]
                await _hand_over(answers, room, events, self)
        self.state.since = response.next_batch
        self.state.save()

    async def _accept_invites(self, response: SyncResponse) -> None:
        for room in response.rooms.invite:
            if room not in self.rooms:
                log.warning("not joining %s: not one of the configured rooms", room)
                continue
            try:
                await self.server.join(room)
            except ChatRefused as refused:  # the next post into it will try again
                log.warning("could not join %s: %s", room, refused.reason)

    async def _skipped(self, room: str, timeline: Any, since: str) -> list[dict[str, Any]]:
        """The events a cut (``limited``) timeline left out since ``since``, oldest first."""
        if not timeline.limited or not timeline.prev_batch:
            return []
        events: list[dict[str, Any]] = []
        start = timeline.prev_batch
        while start and len(events) < _GAP_EVENTS:
            page = await self.server.call(
                "read skipped events",
                self.client.room_messages(room, start, since, MessageDirection.back, 100, _TIMELINE),
            )
            events += [event.source for event in page.chunk]
            start = page.end if page.chunk else None
        return events[::-1]


async def _hand_over(answers: AnswerSink, room: str, events: list[dict[str, Any]], chat: MatrixChat) -> None:
    for event in events:
        answer = answer_of(room, event, chat.user_id, chat.state)
        if answer is None:
            continue
        try:
            await answers(answer)
        except Exception:  # an answer that fails must not stop the others
            log.exception("answer of %s in %s was not handled", answer.chat_user, room)


def _first_sync_filter() -> dict[str, Any]:
    """A filter for the first sync (it only finds where "now" is), unique to this call.

    Synapse caches a sync's answer for two minutes by its parameters: a bot restarted
    within that time would get the old "now" and take earlier answers again. A type that
    no event has, excluded, makes the parameters unique and changes nothing else.
    """
    timeline = {"limit": 0, "not_types": [f"dev.effectgate.none.{secrets.token_hex(8)}"]}
    return {**_SYNC_FILTER, "room": {**_SYNC_FILTER["room"], "timeline": timeline}}


def _card_of(source: dict[str, Any]) -> str | None:
    content = source.get("content")
    marker = content.get(CARD_KEY) if isinstance(content, dict) else None
    approval_id = marker.get("approval_id") if isinstance(marker, dict) else None
    return approval_id if isinstance(approval_id, str) else None
