"""The Matrix chat platform: approval cards in rooms, answers from reactions, redactions and commands.

Built on matrix-nio's :class:`~nio.AsyncClient` (unencrypted rooms). The bot logs in with a
password and a fixed device id, so a message retried with the same transaction id is
stored once by the homeserver (Matrix deduplicates per device). nio's own retries are
switched off: every failure is mapped here, network errors, 5xx and ``M_LIMIT_EXCEEDED``
to :class:`ChatUnavailable` (with the server's ``retry_after_ms``), other refusals
(``M_FORBIDDEN``, an unknown room, an invalid event) to :class:`ChatRefused`.

Answers are read by a sync loop started by :meth:`MatrixChat.start`. Without a stored
sync position it starts from now; with one (``state_dir``) it continues where it stopped,
fetching a room's skipped events when the homeserver cut its timeline, so reactions given
while the bot was down are read. The loop never ends on an error: it waits and tries again.
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

import aiohttp
from nio import AsyncClient, AsyncClientConfig, ErrorResponse, LoginResponse, MessageDirection, SyncResponse

from toolgate.chatops.adapters.matrix_answers import SyncState, answer_of
from toolgate.chatops.adapters.matrix_card import CARD_KEY, card_content, edit_content, thread_content
from toolgate.chatops.domain import Card, ChatAnswer
from toolgate.chatops.errors import ChatOpsError, ChatRefused, ChatUnavailable
from toolgate.chatops.ports import AnswerSink
from toolgate.chatops.settings import ChatopsSettings

__all__ = ["MatrixChat", "matrix_chat"]

log = logging.getLogger("toolgate.chatops.matrix")

_TIMELINE: dict[str, Any] = {"types": ["m.reaction", "m.room.redaction", "m.room.message"], "limit": 100}
_SYNC_FILTER: dict[str, Any] = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {"timeline": _TIMELINE, "state": {"lazy_load_members": True}, "ephemeral": {"not_types": ["*"]}},
}
_NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)
_GAP_EVENTS = 2000
"""Most skipped events fetched per room after a cut timeline."""


class MatrixChat:
    """:class:`~toolgate.chatops.ports.ChatPort` on a Matrix homeserver.

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
        config = AsyncClientConfig(
            max_limit_exceeded=0, max_timeouts=0, request_timeout=request_timeout_s, encryption_enabled=False
        )
        self.client = AsyncClient(homeserver, user_id, device_id=device_id, config=config)
        self.user_id, self._password = user_id, password
        self.rooms, self.mentions = frozenset(rooms), dict(mentions)
        self.state = SyncState(state_dir)
        self.poll_timeout_s, self.max_backoff_s = poll_timeout_s, max_backoff_s
        self._joined: set[str] = set()
        self._login_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def post_card(self, room: str, card: Card, txn_id: str) -> str:
        """See :meth:`ChatPort.post_card`; the homeserver stores one card per ``txn_id``."""
        return await self._send(room, card_content(card, self.mentions), txn_id, "post the card")

    async def find_card(self, room: str, approval_id: str, pages: int = 3) -> str | None:
        """See :meth:`ChatPort.find_card`: the bot's last ``pages`` × 100 messages in ``room`` are searched."""
        await self._ready(room)
        messages_filter = {"senders": [self.user_id], "types": ["m.room.message"]}
        start: str | None = None
        for _ in range(pages):
            page = await self._call(
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
        await self._send(room, content, f"edit-{uuid.uuid4().hex}", "edit the card")

    async def post_in_thread(self, room: str, message_id: str, text: str, txn_id: str) -> None:
        """See :meth:`ChatPort.post_in_thread`."""
        await self._send(room, thread_content(message_id, text), txn_id, "post in the thread")

    async def reply(self, answer: ChatAnswer, text: str) -> None:
        """See :meth:`ChatPort.reply`: in the thread of the card (or command) answered, mentioning the approver."""
        content = thread_content(answer.message_id, text, (answer.chat_user,), preformatted=False)
        if not answer.message_id:
            del content["m.relates_to"]
        await self._send(answer.room, content, None, "reply")

    async def start(self, answers: AnswerSink) -> None:
        """See :meth:`ChatPort.start`: the sync loop runs in a task until :meth:`stop`.

        Raises:
            ChatRefused: the homeserver refused the bot's login (a wrong user or password
                does not mend itself: the bot stops at start). An unreachable homeserver
                only delays the login.
        """
        with contextlib.suppress(ChatUnavailable):
            await self._login()
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

    async def _send(self, room: str, content: dict[str, Any], txn_id: str | None, what: str) -> str:
        await self._ready(room)
        response = await self._call(what, self.client.room_send(room, "m.room.message", content, tx_id=txn_id))
        return str(response.event_id)

    async def _ready(self, room: str) -> None:
        """Log in (once) and join ``room`` (once per process; joining a joined room changes nothing)."""
        await self._login()
        if room not in self._joined:
            await self._call(f"join {room}", self.client.join(room))
            self._joined.add(room)

    async def _login(self) -> None:
        async with self._login_lock:
            if self.client.logged_in:
                return
            response = await self._call("log in", self.client.login(self._password, device_name="toolgate chat-ops"))
            if not isinstance(response, LoginResponse):
                raise ChatRefused(f"Matrix login of {self.user_id} refused")
            log.info("logged in to Matrix as %s (device %s)", self.user_id, self.client.device_id)

    async def _call(self, what: str, request: Any) -> Any:
        """Await one nio request; its error answer or a network failure as a :class:`ChatOpsError`."""
        try:
            response = await request
        except _NETWORK_ERRORS as error:
            raise ChatUnavailable(f"Matrix homeserver unreachable ({what}): {error!r}") from error
        if isinstance(response, ErrorResponse):
            raise self._failure(response, what)
        return response

    def _failure(self, response: ErrorResponse, what: str) -> ChatOpsError:
        status = response.transport_response.status if response.transport_response is not None else 0
        code = response.status_code or str(status)
        reason = f"Matrix refused to {what}: {code} {response.message}"
        if code == "M_LIMIT_EXCEEDED" or status == 429:
            return ChatUnavailable(reason, (response.retry_after_ms or 1000) / 1000)
        if code == "M_UNKNOWN_TOKEN":
            self.client.access_token, self._joined = "", set()  # logged out elsewhere: log in again next time
            return ChatUnavailable(reason)
        return ChatUnavailable(reason) if status >= 500 or status == 0 else ChatRefused(reason)

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
        await self._login()
        since = self.state.since
        timeout_ms = int(self.poll_timeout_s * 1000) if since else 1
        sync = self.client.sync(timeout_ms, _SYNC_FILTER if since else _first_sync_filter(), since)
        response: SyncResponse = await self._call("sync", sync)
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
                await self._call(f"join {room}", self.client.join(room))
                self._joined.add(room)
            except ChatRefused as refused:  # the next post into it will try again
                log.warning("could not join %s: %s", room, refused.reason)

    async def _skipped(self, room: str, timeline: Any, since: str) -> list[dict[str, Any]]:
        """The events a cut (``limited``) timeline left out since ``since``, oldest first."""
        if not timeline.limited or not timeline.prev_batch:
            return []
        events: list[dict[str, Any]] = []
        start = timeline.prev_batch
        while start and len(events) < _GAP_EVENTS:
            page = await self._call(
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
    timeline = {"limit": 0, "not_types": [f"dev.toolgate.none.{secrets.token_hex(8)}"]}
    return {**_SYNC_FILTER, "room": {**_SYNC_FILTER["room"], "timeline": timeline}}


def _card_of(source: dict[str, Any]) -> str | None:
    content = source.get("content")
    marker = content.get(CARD_KEY) if isinstance(content, dict) else None
    approval_id = marker.get("approval_id") if isinstance(marker, dict) else None
    return approval_id if isinstance(approval_id, str) else None


def matrix_chat(settings: ChatopsSettings, mentions: Mapping[str, str]) -> MatrixChat:
    """The Matrix adapter ``settings`` describe (for the composition root).

    Args:
        settings: the bot's settings (homeserver, user, password file, device id, rooms, state dir).
        mentions: approver name -> Matrix user id.

    Raises:
        ValueError: a Matrix setting is missing, or the password file is unreadable or empty
            (names the environment variable).
    """
    missing = [
        f"TOOLGATE_CHATOPS_{name.upper()}"
        for name in ("matrix_homeserver", "matrix_user", "matrix_password_file")
        if not getattr(settings, name)
    ]
    if missing:
        raise ValueError(f"the Matrix chat needs {', '.join(missing)}")
    assert settings.matrix_password_file is not None  # checked above
    logging.getLogger("nio").setLevel(logging.WARNING)  # nio logs every room event it parses at INFO
    try:
        password = settings.matrix_password_file.read_text(encoding="utf-8").strip()
    except OSError as error:
        setting = f"TOOLGATE_CHATOPS_MATRIX_PASSWORD_FILE={settings.matrix_password_file}"
        raise ValueError(f"{setting}: {error.strerror}") from error
    if not password:
        raise ValueError(f"TOOLGATE_CHATOPS_MATRIX_PASSWORD_FILE={settings.matrix_password_file}: the file is empty")
    rooms = {*settings.rooms.values(), settings.default_room} - {""}
    return MatrixChat(
        settings.matrix_homeserver,
        settings.matrix_user,
        password,
        settings.matrix_device_id,
        rooms,
        mentions,
        settings.matrix_state_dir,
    )
