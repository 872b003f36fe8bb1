"""The Slack chat platform: approval cards as Block Kit messages, answers through Bolt.

Built on the official libraries: ``slack_sdk``'s :class:`AsyncWebClient` posts and edits
(``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``, ``conversations.history``) and
Bolt's :class:`~slack_bolt.async_app.AsyncApp` receives answers (see
:mod:`~effectgate.chatops.adapters.slack.receiver`: signed HTTP requests, or Socket Mode).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from effectgate.chatops.adapters.slack import blocks
from effectgate.chatops.adapters.slack.answers import PLATFORM
from effectgate.chatops.adapters.slack.receiver import EVENTS_PATH, Listen, SlackReceiver
from effectgate.chatops.answers import ChatAnswer
from effectgate.chatops.domain import Card, thread_parts
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.ports import AnswerSink
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["API_TIMEOUT_S", "EVENTS_PATH", "Listen", "SlackChat"]

log = logging.getLogger("effectgate.chatops.slack")

API_TIMEOUT_S = 10
"""Timeout of one Slack Web API call, seconds."""

HISTORY_PAGE = 200
"""Messages per ``conversations.history`` page when looking for a card."""

_TRANSIENT = frozenset({"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"})
"""Slack error codes that mean "try again later"."""

THREAD_TEXT = "effectgate: a message in the approval's thread"
"""Notification text of a thread post (its content may be agent text: it is only in the blocks)."""


class SlackChat:
    """:class:`~effectgate.chatops.ports.ChatPort` on Slack (see the module docstring)."""

    platform = PLATFORM

    def __init__(
        self,
        client: AsyncWebClient,
        listen: Listen,
        mentions: Mapping[str, str],
        part_chars: int = 3000,
        history_pages: int = 3,
        reporter: SecurityReporter | None = None,
    ) -> None:
        """Build the adapter; nothing is connected until :meth:`start`.

        Args:
            client: Slack Web API client with the bot token.
            listen: how answers arrive.
            mentions: approver name to Slack user id (the card mentions these).
            part_chars: longest thread message or preformatted card element, characters.
            history_pages: pages of channel history :meth:`find_card` reads at most.
            reporter: reports requests to the endpoint refused for their signature.

        Raises:
            ValueError: HTTP mode without a signing secret, or Socket Mode without an app token.
        """
        self._client, self._mentions = client, dict(mentions)
        self._part_chars, self._history_pages = part_chars, history_pages
        self._bot_user: str | None = None
        self.receiver = SlackReceiver(client, listen, reporter)
        """Bolt and its endpoint (its ``url`` once started)."""

    @property
    def url(self) -> str:
        """The HTTP endpoint's URL once started (HTTP mode), else ``""``."""
        return self.receiver.url

    async def post_card(self, room: str, card: Card, txn_id: str) -> str:
        """See :meth:`ChatPort.post_card`; returns the message ``ts``."""
        with _mapped(f"posting the card of {card.approval_id}"):
            response = await self._client.chat_postMessage(
                channel=room,
                metadata=blocks.card_metadata(card.approval_id),
                unfurl_links=False,
                unfurl_media=False,
                **self._card(card),
            )
        return str(response["ts"])

    async def find_card(self, room: str, approval_id: str) -> str | None:
        """See :meth:`ChatPort.find_card`: the newest ``history_pages`` pages of ``room``, our own messages only."""
        bot_user, cursor = await self._bot_user_id(), None
        for _ in range(self._history_pages):
            with _mapped(f"looking for the card of {approval_id}"):
                page = await self._client.conversations_history(
                    channel=room, include_all_metadata=True, limit=HISTORY_PAGE, cursor=cursor
                )
            messages: list[dict[str, Any]] = page.get("messages") or []
            found = next((m["ts"] for m in messages if _is_card(m, approval_id, bot_user)), None)
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if found or not cursor:
                return str(found) if found else None
        return None

    async def edit_card(self, room: str, message_id: str, card: Card) -> None:
        """See :meth:`ChatPort.edit_card` (``chat.update``, metadata kept)."""
        with _mapped(f"editing the card of {card.approval_id}"):
            await self._client.chat_update(
                channel=room, ts=message_id, metadata=blocks.card_metadata(card.approval_id), **self._card(card)
            )

    async def post_in_thread(self, room: str, message_id: str, text: str, txn_id: str) -> None:
        """See :meth:`ChatPort.post_in_thread`: preformatted, in numbered parts when longer than ``part_chars``."""
        parts = thread_parts(text, self._part_chars)
        for number, part in enumerate(parts, 1):
            shown = f"(part {number} of {len(parts)})\n{part}" if len(parts) > 1 else part
            with _mapped(f"posting in the thread of {message_id}"):
                await self._client.chat_postMessage(
                    channel=room,
                    thread_ts=message_id,
                    text=THREAD_TEXT,
                    blocks=blocks.text_blocks(shown),
                    unfurl_links=False,
                    unfurl_media=False,
                )

    async def reply(self, answer: ChatAnswer, text: str) -> None:
        """See :meth:`ChatPort.reply`: in the card's thread, or to the user alone for a slash command."""
        shown, content = blocks.escape(text), blocks.reply_blocks(answer.chat_user, text)
        with _mapped(f"replying to {answer.chat_user}"):
            if answer.message_id:
                await self._client.chat_postMessage(
                    channel=answer.room, thread_ts=answer.message_id, text=shown, blocks=content
                )
            else:
                await self._client.chat_postEphemeral(
                    channel=answer.room, user=answer.chat_user, text=shown, blocks=content
                )

    async def start(self, answers: AnswerSink) -> None:
        """See :meth:`ChatPort.start`: serve the signed HTTP endpoint, or connect in Socket Mode.

        Raises:
            OSError: the HTTP endpoint's address cannot be bound.
        """
        await self.receiver.start(answers)

    async def stop(self) -> None:
        """See :meth:`ChatPort.stop`."""
        await self.receiver.stop()

    def _card(self, card: Card) -> dict[str, Any]:
        return {
            "text": blocks.card_text(card, self._mentions),
            "blocks": blocks.card_blocks(card, self._mentions, self._part_chars),
        }

    async def _bot_user_id(self) -> str:
        if self._bot_user is None:
            with _mapped("asking Slack who the bot is"):
                self._bot_user = str((await self._client.auth_test())["user_id"])
        return self._bot_user


def _is_card(message: Mapping[str, Any], approval_id: str, bot_user: str) -> bool:
    metadata = message.get("metadata") or {}
    payload = metadata.get("event_payload") or {}
    if message.get("user") != bot_user or metadata.get("event_type") != blocks.CARD_EVENT_TYPE:
        return False
    return bool(payload.get("approval_id") == approval_id)


@contextmanager
def _mapped(what: str) -> Iterator[None]:
    """Turn Slack's failures into :class:`ChatUnavailable` (try again later) or :class:`ChatRefused`."""
    try:
        yield
    except SlackApiError as error:
        status, data = error.response.status_code, error.response.data
        code = str(data.get("error") or "") if isinstance(data, dict) else ""
        if status == 429 or status >= 500 or code in _TRANSIENT:
            raise ChatUnavailable(f"{what}: Slack answered {status} {code}".strip(), _retry_after(error)) from error
        raise ChatRefused(f"{what}: Slack refused it ({code or status})") from error
    except SlackClientError as error:  # e.g. a block over Slack's limits, found before sending
        raise ChatRefused(f"{what}: not sent ({error})") from error
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise ChatUnavailable(f"{what}: Slack cannot be reached ({type(error).__name__})") from error


def _retry_after(error: SlackApiError) -> float | None:
    headers = error.response.headers or {}
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
