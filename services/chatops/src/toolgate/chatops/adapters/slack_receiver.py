"""Answers from Slack: Bolt listeners for the card's buttons, the reject dialog and ``/toolgate``.

HTTP mode (default): Slack posts interactions and slash commands to :data:`EVENTS_PATH` on an
aiohttp server run on ``host``:``port`` in the service's event loop. Bolt checks every request's
signature (HMAC-SHA256 of ``v0:<timestamp>:<body>`` with the signing secret; timestamps more than
5 minutes off refused): an unsigned, wrongly signed or stale request gets 401, reaches nothing and
is reported as an ``approval_refused`` security event (``slack_signature_invalid``). Bolt's own
log line of such a request (the whole body) is silenced.
Socket Mode: Bolt's aiohttp Socket Mode handler with the app-level token, for deployments that
cannot expose an endpoint.

Reject asks for a reason: the click opens a dialog (``views.open`` with the click's trigger id)
and the rejection is handed on when the dialog is submitted; Cancel rejects nothing. If the
dialog cannot be opened, the click rejects at once, without a reason. Nothing raised while
handling an answer leaves the listener: it is logged.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from toolgate.chatops.adapters import slack_blocks as blocks
from toolgate.chatops.adapters.slack_answers import click_of, command_answer, rejection_answer
from toolgate.chatops.domain import Action, ChatAnswer
from toolgate.chatops.ports import AnswerSink
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.security import SecurityKind

__all__ = ["EVENTS_PATH", "USAGE", "Listen", "SlackReceiver"]

log = logging.getLogger("toolgate.chatops.slack")

EVENTS_PATH = "/slack/events"
"""Path of the HTTP endpoint (the Slack app's interactivity and slash command request URL)."""

STALE_AFTER_S = 60 * 5
"""Bolt refuses a request whose timestamp is further off than this, seconds."""

USAGE = "usage: /toolgate approve|reject|withdraw ap-<12 hex> [reason]"


@dataclass(frozen=True)
class Listen:
    """How answers reach the bot.

    Attributes:
        mode: ``http`` (signed requests to our endpoint) or ``socket`` (Socket Mode).
        host: address the HTTP endpoint listens on.
        port: its port; 0 picks a free one (see :attr:`SlackReceiver.url`).
        signing_secret: the app's signing secret (HTTP mode).
        app_token: the app-level token ``xapp-…`` (Socket Mode).
    """

    mode: Literal["http", "socket"] = "http"
    host: str = "127.0.0.1"
    port: int = 3000
    signing_secret: str = ""
    app_token: str = ""


class SlackReceiver:
    """Receives answers with Bolt and hands each to the sink given to :meth:`start`."""

    def __init__(self, client: AsyncWebClient, listen: Listen, reporter: SecurityReporter | None = None) -> None:
        """Register the listeners; nothing is served until :meth:`start`.

        Args:
            client: Slack Web API client with the bot token (Bolt's ``auth.test``, ``views.open``).
            listen: how answers arrive.
            reporter: reports requests refused for their signature (else they are only logged).

        Raises:
            ValueError: HTTP mode without a signing secret, or Socket Mode without an app token.
        """
        if listen.mode == "http" and not listen.signing_secret:
            raise ValueError("Slack HTTP mode needs the signing secret: unsigned requests would be believed")
        if listen.mode == "socket" and not listen.app_token:
            raise ValueError("Slack Socket Mode needs the app-level token (xapp-…)")
        self._client, self._listen, self._reporter = client, listen, reporter
        self._answers: AnswerSink | None = None
        self._runner: web.AppRunner | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self.app = AsyncApp(client=client, signing_secret=listen.signing_secret, logger=log)
        logging.getLogger("slack_bolt.RequestVerification").setLevel(logging.WARNING)  # it logs whole bodies
        self.app.action(blocks.APPROVE)(self._on_click)
        self.app.action(blocks.REJECT)(self._on_click)
        self.app.view(blocks.REJECT_VIEW)(self._on_rejection)
        self.app.command("/toolgate")(self._on_command)
        self.url = ""
        """The HTTP endpoint's URL once started, ``http://host:port/slack/events``."""

    async def start(self, answers: AnswerSink) -> None:
        """Serve the HTTP endpoint, or connect in Socket Mode.

        Raises:
            OSError: the HTTP endpoint's address cannot be bound.
        """
        self._answers = answers
        if self._listen.mode == "socket":
            self._socket = AsyncSocketModeHandler(self.app, self._listen.app_token)
            await self._socket.connect_async()  # type: ignore[no-untyped-call]  # unannotated in Bolt
            return
        endpoint = web.Application()
        endpoint.router.add_post(EVENTS_PATH, self._endpoint)
        self._runner = web.AppRunner(endpoint, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._listen.host, self._listen.port).start()
        host, port = self._runner.addresses[0][:2]
        self.url = str(URL.build(scheme="http", host=host, port=port, path=EVENTS_PATH))
        log.info("Slack endpoint listening on %s", self.url)

    async def stop(self) -> None:
        """Stop serving (or disconnect); answers arriving later are dropped."""
        self._answers = None
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _endpoint(self, request: web.Request) -> web.Response:
        """One request from Slack, through Bolt (signature check first); a refused signature is reported."""
        response = await self.app.async_dispatch(await to_bolt_request(request))
        if response.status == 401:
            self._refused(request, await request.read())
        return await to_aiohttp_response(response)

    def _refused(self, request: web.Request, body: bytes) -> None:
        stale = _is_stale(request.headers.get("X-Slack-Request-Timestamp", ""))
        code = "slack_signature_stale" if stale else "slack_signature_invalid"
        why = "a timestamp over 5 minutes off (a replay?)" if stale else "no valid signature"
        detail = f"a request to the Slack endpoint from {request.remote or 'unknown'} with {why}: refused with 401"
        if self._reporter is None:
            log.warning("%s (%s)", detail, code)
            return
        self._reporter.report(SecurityKind.APPROVAL_REFUSED, reason_code=code, detail=detail, payload=body)

    async def _on_click(self, ack: AsyncAck, body: dict[str, Any], context: dict[str, Any]) -> None:
        await ack()
        click = click_of(body)
        if click is None:
            log.warning("a Slack click without a user, channel, card or known button was dropped")
            return
        if click.answer.chat_user == context.get("bot_user_id"):
            return  # the bot's own click means nothing
        if click.answer.action is Action.REJECT and await self._ask_reason(click.answer, click.trigger_id):
            return  # the dialog's submission gives the rejection
        await self._deliver(click.answer)

    async def _ask_reason(self, answer: ChatAnswer, trigger_id: str) -> bool:
        """Open the reject dialog; ``False`` when it cannot be opened."""
        view = blocks.reject_view(answer.approval_id or "", answer.room, answer.message_id)
        try:
            await self._client.views_open(trigger_id=trigger_id, view=view)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as error:
            log.warning("the reject dialog could not be opened (%s): rejecting without a reason", error)
            return False
        return True

    async def _on_rejection(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        answer = rejection_answer(body)
        if answer is None:
            log.warning("a Slack reject dialog without its card was dropped")
            return
        await self._deliver(answer)

    async def _on_command(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        answer = command_answer(command)
        if answer is None:
            await ack(text=USAGE)
            return
        await ack(text=blocks.escape(f"{answer.action} {answer.approval_id}: sent"))
        await self._deliver(answer)

    async def _deliver(self, answer: ChatAnswer) -> None:
        """Hand ``answer`` to the sink; nothing raised here leaves the listener."""
        if self._answers is None:
            log.warning("a Slack answer arrived while the adapter is stopped: dropped")
            return
        try:
            await self._answers(answer)
        except Exception:
            log.exception("the answer of %s could not be handed on", answer.chat_user)


def _is_stale(timestamp: str) -> bool:
    """Whether ``X-Slack-Request-Timestamp`` is more than Bolt's 5 minutes off now (unparsable: no)."""
    try:
        return abs(time.time() - int(timestamp)) > STALE_AFTER_S
    except ValueError:
        return False
