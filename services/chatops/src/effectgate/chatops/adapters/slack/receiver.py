"""Answers from Slack: Bolt listeners for the card's buttons, the reject dialog and ``/effectgate``.

HTTP mode (default): Slack posts interactions and slash commands to :data:`EVENTS_PATH` on an
aiohttp server run on ``host``:``port`` in the service's event loop.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from slack_bolt import BoltResponse
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltRequest
from slack_sdk.errors import SlackClientError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

from effectgate.chatops.adapters.slack import blocks, edge
from effectgate.chatops.adapters.slack.answers import click_of, command_answer, rejection_answer
from effectgate.chatops.answers import Action, ChatAnswer
from effectgate.chatops.errors import RequestRefused
from effectgate.chatops.ports import AnswerSink
from effectgate.contracts.security import SecurityKind
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["EVENTS_PATH", "USAGE", "Listen", "SlackReceiver"]

log = logging.getLogger("effectgate.chatops.slack")

EVENTS_PATH = "/slack/events"
"""Path of the HTTP endpoint (the Slack app's interactivity and slash command request URL)."""

USAGE = "usage: /effectgate approve|reject|withdraw ap-<12 hex> [reason]"


@dataclass(frozen=True)
class Listen:
    """How answers reach the bot.

    Attributes:
        mode: ``http`` (signed requests to our endpoint) or ``socket`` (Socket Mode).
        host: address the HTTP endpoint listens on.
        port: its port; 0 picks a free one (see :attr:`SlackReceiver.url`).
        socket_fd: a listening socket inherited from the starting process, served instead of
            binding ``host:port``; ``None``: bind.
        signing_secret: the app's signing secret (HTTP mode).
        app_token: the app-level token ``xapp-…`` (Socket Mode).
    """

    mode: Literal["http", "socket"] = "http"
    host: str = "127.0.0.1"
    port: int = 3000
    socket_fd: int | None = None
    signing_secret: str = ""
    app_token: str = ""


class SlackReceiver:
    """Receives answers with Bolt and hands each to the sink given to :meth:`start`."""

    def __init__(self, client: AsyncWebClient, listen: Listen, reporter: SecurityReporter | None = None) -> None:
        """Register the listeners; nothing is served until :meth:`start`.

        Args:
            client: Slack Web API client with the bot token (Bolt's ``auth.test``, ``views.open``).
            listen: how answers arrive.
            reporter: reports requests the endpoint refuses (else they are only logged).

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
        self._verifier = SignatureVerifier(listen.signing_secret) if listen.mode == "http" else None
        self._seen = edge.SeenRequests()
        self.app = AsyncApp(client=client, signing_secret=listen.signing_secret, logger=log)
        logging.getLogger("slack_bolt.RequestVerification").setLevel(logging.WARNING)  # it logs whole bodies
        self.app.error(self._on_error)
        self.app.action(blocks.APPROVE)(self._on_click)
        self.app.action(blocks.REJECT)(self._on_click)
        self.app.view(blocks.REJECT_VIEW)(self._on_rejection)
        self.app.command("/effectgate")(self._on_command)
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
        endpoint = web.Application(client_max_size=edge.MAX_BODY_BYTES)
        endpoint.router.add_post(EVENTS_PATH, self._endpoint)
        self._runner = web.AppRunner(endpoint, access_log=None, logger=edge.ServerLog(self._unreadable))
        await self._runner.setup()
        await self._site(self._runner).start()
        host, port = self._runner.addresses[0][:2]
        self.url = str(URL.build(scheme="http", host=host, port=port, path=EVENTS_PATH))
        log.info("Slack endpoint listening on %s", self.url)

    def _site(self, runner: web.AppRunner) -> web.BaseSite:
        """The inherited listening socket when there is one, else ``host:port`` to bind."""
        if self._listen.socket_fd is not None:
            return web.SockSite(runner, socket.socket(fileno=self._listen.socket_fd))
        return web.TCPSite(runner, self._listen.host, self._listen.port)

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
        """One request from Slack: checked (see the module docstring), then dispatched by Bolt."""
        try:
            body, bolt_request = await self._admitted(request)
        except RequestRefused as refused:
            self._report(request.remote, refused.reason_code, f"{refused}: answered {refused.status}", refused.digest)
            return web.Response(status=refused.status, text=refused.answer)
        response = await self.app.async_dispatch(bolt_request)
        if response.status in _BOLT_REFUSALS:  # Bolt's own signature check, or a shape only Bolt met
            code, why = _BOLT_REFUSALS[response.status]
            self._report(request.remote, code, f"{why}: answered {response.status}", body.digest)
        return await to_aiohttp_response(response)

    async def _admitted(self, request: web.Request) -> tuple[edge.Body, AsyncBoltRequest]:
        """The body and Bolt's request of one that passed size, signature, replay and parse checks.

        Raises:
            RequestRefused: it failed one (see :mod:`~effectgate.chatops.adapters.slack.edge`).
        """
        assert self._verifier is not None  # HTTP mode: checked in __init__
        body = await edge.read_body(request.content)
        timestamp = edge.signed_at(self._verifier, request.headers, body, time.time())
        edge.check_fresh(self._seen, request.headers, timestamp, body)
        return body, edge.bolt_request(body, request.query_string, request.headers)

    async def _on_error(self, error: Exception, response: BoltResponse | None) -> BoltResponse | None:
        """Bolt's handler of what its middleware or matchers raised: fields of a shape Bolt cannot use.

        One log line (the error's type only: no traceback, no body); the request is answered 400
        (reported by :meth:`_endpoint`), or, when raised after the ack, only logged.
        """
        log.warning("a Slack request Bolt could not handle (%s): refused", type(error).__name__)
        if response is None:
            return None
        return BoltResponse(status=400, body="malformed request: a field has the wrong shape")

    def _unreadable(self, remote: str | None, error: HttpProcessingError) -> None:
        """Report the 400 aiohttp gave a request whose head it could not read (see :class:`edge.ServerLog`)."""
        why = f"with a head that cannot be read ({type(error).__name__})"
        self._report(remote, edge.MALFORMED, f"{why}: answered {error.code}", None)

    def _report(self, remote: str | None, reason_code: str, why: str, digest: str | None) -> None:
        detail = f"a request to the Slack endpoint from {remote or 'unknown'} {why}"
        if self._reporter is None:
            log.warning("%s (%s)", detail, reason_code)
            return
        self._reporter.report(
            SecurityKind.APPROVAL_REFUSED, reason_code=reason_code, detail=detail, payload_sha256=digest
        )

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


_BOLT_REFUSALS = {
    400: (edge.MALFORMED, "where Bolt met a field of the wrong shape"),
    401: ("slack_signature_invalid", "with a signature Bolt refused"),
}
"""Bolt's answers that refuse a request our checks passed (400 only comes from :meth:`SlackReceiver._on_error`)."""
