"""Test double for Slack: a loopback Web API (tests only, never the bot)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

__all__ = [
    "Call",
    "FakeSlack",
    "serving",
]

Json = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One Web API call as the fake received it.

    Attributes:
        method: e.g. ``chat.postMessage``.
        params: its arguments (JSON body, form or query), as sent.
        answer: what the fake answered (HTTP status, body).
    """

    method: str
    params: Json
    answer: tuple[int, Json]


@dataclass
class FakeSlack:
    """A loopback Slack Web API (see the module docstring).

    Attributes:
        token: the bot token it accepts (any other: ``invalid_auth``).
        channels: channel ids that exist (any other: ``channel_not_found``).
        bot_user: the bot's user id (``auth.test``; the author of its messages).
        calls: every call, in order.
        messages: channel id to its messages, oldest first (thread replies included).
    """

    token: str = "xoxb-fake-token"
    channels: tuple[str, ...] = ("C0CARDS",)
    bot_user: str = "U0BOT"
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[Json]] = field(default_factory=dict)
    _failures: list[tuple[str | None, int, float | None]] = field(default_factory=list)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _runner: web.AppRunner | None = None
    api_url: str = ""

    async def start(self) -> None:
        """Listen on a free loopback port; :attr:`api_url` is then ``http://127.0.0.1:<port>/api/``."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        port = self._runner.addresses[0][1]
        self.api_url = f"http://127.0.0.1:{port}/api/"

    async def stop(self) -> None:
        """Stop listening (calls then fail with a connection error)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def fail(self, status: int, method: str | None = None, retry_after_s: float | None = None, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` (any method: ``None``) with HTTP ``status``.

        429 answers ``{"ok": false, "error": "ratelimited"}`` with ``Retry-After``; any other
        status answers an HTML error page, as Slack's edge does.
        """
        self._failures.extend([(method, status, retry_after_s)] * times)

    def called(self, method: str) -> list[Json]:
        """The params of every successful call of ``method``, in order."""
        return [c.params for c in self.calls if c.method == method and c.answer[1].get("ok")]

    async def wait_for(
        self, method: str, match: Callable[[Json], bool] = lambda _: True, timeout_s: float = 10.0
    ) -> Json:
        """The first successful call of ``method`` whose params ``match``, waiting up to ``timeout_s``.

        Raises:
            TimeoutError: no such call came in time.
        """
        async with asyncio.timeout(timeout_s):
            while True:
                found = next((p for p in self.called(method) if match(p)), None)
                if found is not None:
                    return found
                await asyncio.sleep(0.02)

    def thread(self, channel: str, ts: str) -> list[Json]:
        """The replies in the thread of message ``ts``, oldest first."""
        return [m for m in self.messages.get(channel, []) if m.get("thread_ts") == ts]

    def message(self, channel: str, ts: str) -> Json | None:
        """The message ``ts`` of ``channel`` as it stands now."""
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        failure = self._failure(method)
        if failure is not None:
            status, retry_after = failure
            self.calls.append(Call(method, params, (status, {"ok": False})))
            return _failure_response(status, retry_after)
        answer = self._answer(method, params, request.headers.get("Authorization", ""))
        self.calls.append(Call(method, params, (200, answer)))
        return web.json_response(answer)

    def _failure(self, method: str) -> tuple[int, float | None] | None:
        for index, (only, status, retry_after) in enumerate(self._failures):
            if only in (None, method):
                del self._failures[index]
                return status, retry_after
        return None

    def _answer(self, method: str, params: Json, authorization: str) -> Json:
        if authorization != f"Bearer {self.token}":
            return {"ok": False, "error": "invalid_auth"}
        handler = _METHODS.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        if "channel" in params and params["channel"] not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        return handler(self, params)

    def _auth_test(self, _: Json) -> Json:
        return {"ok": True, "user_id": self.bot_user, "bot_id": "B0BOT", "team_id": "T0FAKE", "user": "effectgate"}

    def _post(self, params: Json) -> Json:
        if not params.get("text") and not params.get("blocks"):
            return {"ok": False, "error": "no_text"}
        ts = self._next_ts()
        message = {"type": "message", "user": self.bot_user, "bot_id": "B0BOT", "ts": ts}
        message |= {k: params[k] for k in ("text", "blocks", "metadata", "thread_ts") if k in params}
        self.messages.setdefault(params["channel"], []).append(message)
        return {"ok": True, "channel": params["channel"], "ts": ts, "message": message}

    def _update(self, params: Json) -> Json:
        message = self.message(params["channel"], str(params.get("ts")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message |= {k: params[k] for k in ("text", "blocks", "metadata") if k in params}
        return {"ok": True, "channel": params["channel"], "ts": message["ts"], "text": message.get("text", "")}

    def _ephemeral(self, params: Json) -> Json:
        return {"ok": True, "message_ts": self._next_ts()} if params.get("user") else {"ok": False, "error": "no_user"}

    def _history(self, params: Json) -> Json:
        with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        top = [m for m in reversed(self.messages.get(params["channel"], [])) if "thread_ts" not in m]
        start, limit = int(params.get("cursor") or 0), int(params.get("limit") or 100)
        page = [m if with_metadata else {k: v for k, v in m.items() if k != "metadata"} for m in top[start:][:limit]]
        more = start + limit < len(top)
        cursor = str(start + limit) if more else ""
        return {"ok": True, "messages": page, "has_more": more, "response_metadata": {"next_cursor": cursor}}

    def _views_open(self, params: Json) -> Json:
        if not params.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        return {"ok": True, "view": {"id": f"V{next(self._ts):08d}", **(params.get("view") or {})}}

    def _next_ts(self) -> str:
        number = next(self._ts)
        return f"{1_700_000_000 + number}.{number:06d}"


_METHODS: dict[str, Callable[[FakeSlack, Json], Json]] = {
    "auth.test": FakeSlack._auth_test,
    "chat.postMessage": FakeSlack._post,
    "chat.update": FakeSlack._update,
    "chat.postEphemeral": FakeSlack._ephemeral,
    "conversations.history": FakeSlack._history,
    "views.open": FakeSlack._views_open,
}


async def _params(request: web.Request) -> Json:
    params: Json = dict(request.query)
    if request.content_type == "application/json":
        params |= await request.json()
    elif request.can_read_body:
        params |= dict(parse_qsl(await request.text()))
    for key in ("view", "blocks", "metadata"):  # form posts carry these as JSON strings
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


def _failure_response(status: int, retry_after_s: float | None) -> web.Response:
    if status == 429:
        headers = {"Retry-After": f"{retry_after_s:g}"} if retry_after_s is not None else {}
        return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers=headers)
    return web.Response(status=status, text="<html><body>server error</body></html>", content_type="text/html")


@contextmanager
def serving(slack: FakeSlack, timeout_s: float = 10.0) -> Iterator[FakeSlack]:
    """Run ``slack`` on an event loop in a thread of its own until the block ends.

    Its records can be read from any thread (:meth:`FakeSlack.wait_for` polls them).
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-slack", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(slack.start(), loop).result(timeout_s)
        yield slack
        asyncio.run_coroutine_threadsafe(slack.stop(), loop).result(timeout_s)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout_s)
        loop.close()
