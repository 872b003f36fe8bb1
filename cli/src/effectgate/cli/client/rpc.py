"""The CLI's requests to the running services (core NATS request/reply)."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec
import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import TOKEN, Rpc
from effectgate.contracts.bus.nats_accounts import js_api_of
from effectgate.contracts.bus.nats_credentials import connect_arguments
from effectgate.contracts.bus.nats_permissions import JS_API
from effectgate.contracts.errors import Problem
from effectgate.contracts.rpc.approvals import APPROVAL_NOT_OPEN, DecideCommand, DecideReply
from effectgate.shared.runtime.connections import connect_once

__all__ = ["Bus", "BusError", "Listing", "PermissionRefused", "ask", "decide", "decide_when_open", "pages", "request"]

T = TypeVar("T")

_VIOLATION = re.compile(r"permissions violation for (publish|subscription) to \"?([^\"']+)", re.I)


class BusError(Problem):
    """A service did not answer, or the request could not be sent."""


class PermissionRefused(BusError):
    """The NATS server refused this connection's user a publish or a subscription."""


class Bus:
    """One CLI connection, and the permission violations the server reported on it.

    Use ``bus = await Bus.connect(url, user, **options)``, ``user`` naming the connection's
    NATS user in messages (``options`` hold the credentials); ``bus.nc`` is the nats-py client.
    """

    def __init__(self, user: str | None) -> None:
        self.user = user
        self.nc: Client
        self.js_api = JS_API
        self._refusal: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    @classmethod
    async def connect(cls, url: str, user: str | None, /, **options: Any) -> Bus:
        """Connect once (``connect_once``) with ``options``, watching for permission violations.

        Raises:
            effectgate.shared.runtime.connections.NatsUnreachable: no connection (wrong credentials included).
        """
        bus = cls(user)
        bus.nc = await connect_once(url, error_cb=bus._on_error, **options)
        bus.js_api = js_api_of(connect_arguments(url, options)[1].get("user"))  # the URL's user counts too
        return bus

    def jetstream(self) -> JetStreamContext:
        """A JetStream context on the API prefix the connection's user calls (the operator's account imports it).

        ``$JS.API`` without a user (an open server has no accounts):
        :func:`~effectgate.contracts.bus.nats_accounts.js_api_of` of the user the options or the URL name.
        """
        return self.nc.jetstream(prefix=self.js_api)

    async def _on_error(self, error: Exception) -> None:
        if (found := _VIOLATION.search(str(error))) and not self._refusal.done():
            kind = "publish to" if found[1].lower() == "publish" else "subscribe to"
            who = f"NATS user {self.user}" if self.user else "this connection (no credentials)"
            self._refusal.set_result(f"permission refused: {who} may not {kind} {found[2]}")

    async def request(self, subject: str, body: Any, timeout_s: float = 5.0) -> Any:
        """Send ``body`` as JSON and return the decoded JSON answer.

        Raises:
            PermissionRefused: the server refused this user the subject (or its reply inbox).
            BusError: no responder or no answer within ``timeout_s`` seconds.
        """
        asking = asyncio.ensure_future(self.nc.request(subject, msgspec.json.encode(body), timeout=timeout_s))
        racing: set[asyncio.Future[Any]] = {asking, self._refusal}
        await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        if not asking.done():
            asking.cancel()
            raise PermissionRefused(self._refusal.result())
        try:
            reply = asking.result()
        except nats.errors.NoRespondersError:
            raise BusError(f"no service answers on {subject}: is `effectgate up` running?") from None
        except nats.errors.TimeoutError:
            raise BusError(f"no answer on {subject} within {timeout_s}s") from None
        return msgspec.json.decode(reply.data)

    async def close(self) -> None:
        """Close the connection."""
        await self.nc.close()


async def request(bus: Bus, subject: str, body: Any, timeout_s: float = 5.0) -> Any:
    """``bus.request``: send ``body`` as JSON and return the decoded answer (see :meth:`Bus.request`)."""
    return await bus.request(subject, body, timeout_s)


async def listing(bus: Bus, timeout_s: float = 5.0) -> dict[str, Any]:
    """The registry's listing (``tg.registry.list``): ``{"descriptors": [...], "states": {...}}``.

    Raises:
        BusError: the registry refused it (``reply_too_large`` …): never read as an empty registry.
    """
    reply: dict[str, Any] = await bus.request(Rpc.REGISTRY_LIST, {}, timeout_s)
    if not reply.get("ok"):
        raise BusError(f"the registry refused its listing: {reply.get('reason_code')}: {reply.get('reason')}")
    return reply


async def ask(bus: Bus, subject: str, body: msgspec.Struct, reply: type[T], timeout_s: float = 5.0) -> T:
    """Send a contract request body and return the answer as its contract reply type.

    Raises:
        PermissionRefused / BusError: as :meth:`Bus.request`; BusError also for an answer not of type ``reply``.
    """
    answer = await bus.request(subject, body, timeout_s)
    try:
        return msgspec.convert(answer, reply)
    except msgspec.ValidationError as error:
        raise BusError(f"the answer on {subject} is not a {reply.__name__}: {error}") from None


async def decide(
    bus: Bus, approver: str, approval_id: str, approve: bool, note: str = "", *, withdraw: bool = False
) -> dict[str, Any]:
    """Approve (vote for), reject, or withdraw one's vote on ``approval_id`` as ``approver``.

    ``withdraw`` takes back ``approver``'s vote (``approve`` must then be ``False``).

    Raises:
        ValueError: ``approver`` is not a valid identity token.
        PermissionRefused: the connection's user may not answer as ``approver`` (says so).
        BusError: the approvals service did not answer.
    """
    if not TOKEN.match(approver):
        raise ValueError(f"approver {approver!r} must match {TOKEN.pattern}")
    body = DecideCommand(approval_id=approval_id, approve=approve, note=note, withdraw=withdraw)
    try:
        answer: dict[str, Any] = msgspec.to_builtins(await ask(bus, Rpc.approvals_decide(approver), body, DecideReply))
    except PermissionRefused as refused:
        hint = f"--as {approver} answers as NATS user approver-{approver}: it needs {approver}'s own credentials"
        raise PermissionRefused(f"{refused}; {hint}") from None
    return answer


async def decide_when_open(
    bus: Bus,
    approver: str,
    approval_id: str,
    approve: bool,
    note: str = "",
    *,
    withdraw: bool = False,
    wait_s: float = 10.0,
) -> dict[str, Any]:
    """:func:`decide`, answered again while the approval is not open yet, for up to ``wait_s`` seconds.

    An approval not open yet (``approval_not_open``: its request is still being decided, or
    it opens in a moment) changed nothing and reported nothing, so answering again is safe.
    Returns the last answer (``approval_not_open`` when the time ran out).

    Raises:
        As :func:`decide`.
    """
    deadline, delay_s = time.monotonic() + wait_s, 0.2
    while True:
        answer = await decide(bus, approver, approval_id, approve, note, withdraw=withdraw)
        if answer.get("reason_code") != APPROVAL_NOT_OPEN or time.monotonic() + delay_s > deadline:
            return answer
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, 2.0)


MAX_PAGES = 10_000
"""Most pages one listing reads (a listing that never ends is refused, not followed forever)."""


@dataclass
class Listing:
    """Every item of a paged listing (:mod:`effectgate.contracts.bus.paging`), or the page that was refused.

    Attributes:
        ok: every page asked for was answered.
        items: the items, in listing order.
        next: the cursor after the last page read (``None``: the listing's end).
        refusal: the refused page's answer (``reason_code``, ``reason``), when not ``ok``.
    """

    ok: bool
    items: list[Any] = field(default_factory=list)
    next: str | None = None
    refusal: dict[str, Any] = field(default_factory=dict)


async def pages(
    bus: Bus, subject: str, query: dict[str, Any], member: str, one_page: bool = False, timeout_s: float = 10.0
) -> Listing:
    """Read a paged listing on ``subject``: every page, or one when ``one_page``.

    Args:
        bus: the connection.
        subject: e.g. ``tg.approvals.list``.
        query: the page query (``after`` is where to start; ``limit``, ``summary``).
        member: the answer's member holding the items (``approvals``, ``descriptors``).
        one_page: stop after the first page.
        timeout_s: wait per page, seconds.

    Raises:
        BusError: no answer, or more than :data:`MAX_PAGES` pages.
    """
    listing, after = Listing(ok=True), query.get("after")
    for _ in range(MAX_PAGES):
        page: dict[str, Any] = await bus.request(subject, {**query, "after": after}, timeout_s)
        if not page.get("ok"):
            return Listing(ok=False, items=listing.items, next=after, refusal=page)
        listing.items += page.get(member) or []
        listing.next = after = page.get("next")
        if after is None or one_page:
            return listing
    raise BusError(f"the listing on {subject} did not end within {MAX_PAGES} pages")
