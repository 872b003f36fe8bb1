"""``ToolClient``: how an agent calls tools through toolgate.

The agent's principal is the token of the subject it publishes on
(``tg.req.<principal>``); with NATS permissions it can publish nowhere else, so the
principal is proven by the transport, not claimed in the body. Receipts arrive on
``tg.receipt.<principal>.<request_id>``; the client subscribes before it publishes,
so no receipt is missed, including one that arrives after a long pending approval.

Every receipt is signed by the executor's receipts key (Ed25519). The client verifies each
one with the executor's public key (``receipts.pub`` in the public keys directory) over the
fields as sent, and ignores an unsigned or forged receipt (logged), so it keeps waiting for
the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
from nacl.public import PublicKey
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

from toolgate.contracts import catalog
from toolgate.contracts.approval_ids import approval_id_for
from toolgate.contracts.canonical import unrepresentable
from toolgate.contracts.catalog import STREAM, TOKEN, Rpc, Subjects
from toolgate.contracts.descriptors import SEMVER, TOOL_NAME, ToolDescriptor
from toolgate.contracts.errors import described
from toolgate.contracts.events import DecisionMade, ReceiptIssued, ResultRef, ToolRequested, encode
from toolgate.contracts.listing import ToolsReply
from toolgate.contracts.nats_credentials import load_credentials
from toolgate.contracts.nats_permissions import agent_user
from toolgate.contracts.paging import PageQuery
from toolgate.contracts.receipt_detail import with_detail
from toolgate.contracts.rpc.approvals import ApprovalStatus, WithdrawReply
from toolgate.contracts.stream_limits import store_full
from toolgate.sdk import standing
from toolgate.sdk.connecting import connect_quietly
from toolgate.sdk.errors import (
    ApprovalsNoAnswer,
    BusUnreachable,
    DuplicateRequest,
    GatewayStoreFull,
    RegistryNoAnswer,
    RegistryUnavailable,
    ResultUnavailable,
    UnknownTool,
)
from toolgate.sdk.listing import every_tool
from toolgate.sdk.local_receipts import oversized_receipt
from toolgate.sdk.receipts import ReceiptKeyMissing, ReceiptVerifier
from toolgate.sdk.results import read_detail, read_result
from toolgate.sdk.sealing import Sealer, SealingKeyMissing, find_sealing_key
from toolgate.sdk.tracing import with_trace_context

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "DuplicateRequest",
    "GatewayStoreFull",
    "ReceiptKeyMissing",
    "RegistryNoAnswer",
    "RegistryUnavailable",
    "ResultUnavailable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
]

_receipt = msgspec.json.Decoder(ReceiptIssued)

_SEALING_REFUSED = frozenset({"secret_not_sealed", "sealed_unexpected"})

DESCRIPTOR_MAX_AGE_S = 10.0
"""How long a descriptor this client looked up is used to seal arguments without asking again (seconds)."""

RECONNECT_LOOK_S = 1.0
"""While a receipt is awaited, how often the client checks whether its connection was re-made (seconds)."""

MAX_UNCLAIMED = 10_000
"""Requests whose receipt nobody has asked for yet, kept at most (the oldest are forgotten:
``receipt()`` then reads it from the stream), so a client that submits without waiting, or
hears another process's receipts of its principal, does not grow without bound."""


log = logging.getLogger("toolgate.sdk")


async def _log_error(error: Exception) -> None:
    log.warning("NATS connection: %s", error or type(error).__name__)


def _agent_credentials(path: str | Path, principal: str) -> dict[str, str]:
    """The file's ``nats.connect`` options, if they are the credentials of ``principal``'s agent user.

    Raises:
        CredentialsInvalid: as :func:`load_credentials`.
        ValueError: the file's user is not ``agent-<principal>``.
    """
    options = load_credentials(path)
    if options["user"] != agent_user(principal):
        raise ValueError(f"{path} holds the credentials of {options['user']}, not of {agent_user(principal)}")
    return options


class ToolClient:
    """An agent's connection to toolgate.

    Use ``async with await ToolClient.connect(url, principal, public_keys=…) as client``.

    Args:
        nc: a connected NATS client.
        principal: the agent's principal (the token of ``tg.req.<principal>``).
        receipts: what the client believes on its receipts subject (:mod:`toolgate.sdk.receipts`).
        sealing_key: the executor's sealing public key (secret arguments).
        decisions: what the client believes of a stored decision (:mod:`toolgate.sdk.standing`);
            default: the policy's ``policy.pub`` in ``$TOOLGATE_PUBLIC_KEYS_DIR`` if it is there.
    """

    def __init__(
        self,
        nc: Client,
        principal: str,
        receipts: ReceiptVerifier,
        sealing_key: PublicKey | None = None,
        decisions: standing.DecisionVerifier | None = None,
    ) -> None:
        if not TOKEN.match(principal):
            raise ValueError(f"principal {principal!r} must match {TOKEN.pattern}")
        self._nc, self.principal, self._receipts = nc, principal, receipts
        self._decisions = decisions or standing.DecisionVerifier.from_directory(None)
        self._described: dict[tuple[str, str | None], ToolDescriptor] = {}
        self._described_at: dict[tuple[str, str | None], float] = {}
        self.descriptor_max_age_s = DESCRIPTOR_MAX_AGE_S
        self._sealer = Sealer(sealing_key if sealing_key is not None else find_sealing_key())
        self._js = nc.jetstream()
        self._waiting: dict[str, asyncio.Future[ReceiptIssued]] = {}
        self._arrived: dict[str, ReceiptIssued] = {}
        self._covered: dict[str, int] = {}
        """request id → the connection's reconnect count when its receipt was last known to be covered."""
        self._subscription: Any = None

    @classmethod
    async def connect(
        cls,
        url: str,
        principal: str,
        *,
        credentials: str | Path | None = None,
        public_keys: str | Path | None = None,
        verify_receipts: bool = True,
        sealing_key: str | None = None,
        **options: Any,
    ) -> ToolClient:
        """Connect as ``principal``; ``options`` go to ``nats.connect`` (credentials, inbox_prefix, tls, …).

        The first connection is tried a few times with backoff over about 5 s, quietly
        (:mod:`toolgate.sdk.connecting`); once connected, a lost connection is retried up to
        30 times one second apart (``max_reconnect_attempts``, ``reconnect_time_wait``), each
        failure logged as one warning line. Each attempt waits at most 2 s (``connect_timeout``).

        Args:
            url: the NATS server (``toolgate up`` prints it).
            principal: the agent's principal (it publishes on ``tg.req.<principal>``).
            credentials: a credentials file (``.toolgate/credentials/agent-<principal>.json``,
                :mod:`toolgate.contracts.nats_credentials`): its user, password and inbox prefix.
            public_keys: directory of the gateway's public keys (``toolgate up``:
                ``.toolgate/keys/public``; default ``$TOOLGATE_PUBLIC_KEYS_DIR``): the
                executor's ``receipts.pub`` verifies receipts, its ``sealing.pub`` is what
                secret arguments are sealed to, the policy's ``policy.pub`` verifies
                stored decisions (:meth:`decision`).
            verify_receipts: ``False`` accepts unsigned receipts (logged loudly; never in production).
            sealing_key: the executor's sealing public key (base64) instead of ``sealing.pub``
                (:mod:`toolgate.sdk.sealing` names the environment fallbacks).
            options: more ``nats.connect`` options; they win over the file's.

        Raises:
            ReceiptKeyMissing: no ``receipts.pub`` and ``verify_receipts`` is true.
            toolgate.contracts.nats_credentials.CredentialsInvalid: the file cannot be used.
            ValueError: ``receipts.pub`` is not a base64 Ed25519 public key; the credentials
                file is another agent's (``agent-<other>``), or not an agent's.
            PermissionError: the server refused the credentials (at once, not after the retries).
            BusUnreachable: the server could not be reached (also a ``nats.errors.NoServersError``).
            OSError / ValueError: a sealing key is named but unreadable or invalid.
        """
        public_keys = Path(public_keys) if public_keys is not None else None
        receipts = ReceiptVerifier.from_directory(public_keys, verify_receipts)
        sealer_key = find_sealing_key(public_keys, sealing_key)
        if credentials is not None:
            options = {**_agent_credentials(credentials, principal), **options}
        defaults: dict[str, Any] = {"connect_timeout": 2.0, "max_reconnect_attempts": 30, "reconnect_time_wait": 1.0}
        settings = {**defaults, **options}
        nc = await connect_quietly(url, settings.pop("error_cb", _log_error), **settings)
        decisions = standing.DecisionVerifier.from_directory(public_keys)
        client = cls(nc, principal, receipts, sealing_key=sealer_key, decisions=decisions)
        await client.start()
        return client

    async def start(self) -> None:
        """Subscribe to this principal's receipts."""
        self._subscription = await self._nc.subscribe(Subjects.receipts_of(self.principal), cb=self._on_receipt)

    async def _on_receipt(self, msg: Msg) -> None:
        issued = self._mine(msg.subject, self._receipts.verified(msg.data))
        if issued is None:
            return
        future = self._waiting.get(issued.request_id)
        if future is None:
            self._arrived[issued.request_id] = issued
            while len(self._arrived) > MAX_UNCLAIMED:
                del self._arrived[next(iter(self._arrived))]
        elif not future.done():
            future.set_result(issued)

    @property
    def is_closed(self) -> bool:
        """Whether the connection is closed for good (closed, or lost beyond its reconnect attempts)."""
        return bool(self._nc.is_closed)

    async def close(self) -> None:
        """Drain the connection; close it at once when it cannot drain (lost, reconnecting).

        Never raises: leaving ``async with`` on an error (a ``TimeoutError`` while the server
        is away) keeps that error rather than replacing it with the connection's state.
        """
        if self._nc.is_closed:
            return
        try:
            await self._nc.drain()
        except (TimeoutError, nats.errors.Error, OSError) as error:
            log.warning("NATS connection could not drain (%s): closed", described(error))
            await self._nc.close()

    async def __aenter__(self) -> ToolClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def list_tools(self, timeout_s: float = 5.0) -> list[ToolDescriptor]:
        """The tools this principal may call, each at its latest version, from every page of the listing.

        Each shows only the operations the current policy lets this principal call
        (directly or with an approval). Asked on ``tg.tools.list.<principal>``; the policy
        service answers in pages (:mod:`toolgate.sdk.listing`).

        Raises:
            RegistryUnavailable: no answer within ``timeout_s`` seconds (per page), or a refusal.
        """
        return await every_tool(lambda after: self.list_tools_page(after, timeout_s=timeout_s), self.describe)

    async def list_tools_page(
        self, after: str | None = None, limit: int | None = None, timeout_s: float = 5.0
    ) -> ToolsReply:
        """One page of :meth:`list_tools`: tools in name order after ``after`` (a page's ``next``).

        Returns:
            The page: ``descriptors``, ``summaries`` (tools too large for a page alone) and ``next``.

        Raises:
            RegistryUnavailable: no answer within ``timeout_s`` seconds, or a refusal.
        """
        query = PageQuery(after=after) if limit is None else PageQuery(after=after, limit=limit)
        return await self._registry(Rpc.tools_list(self.principal), msgspec.json.encode(query), timeout_s)

    async def describe(self, tool: str, version: str | None = None, timeout_s: float = 5.0) -> ToolDescriptor:
        """One tool's descriptor as this principal sees it (``version=None``: the latest).

        Raises:
            RegistryUnavailable: no answer, or no such tool for this principal (a tool it
                may not call is answered exactly like one that does not exist).
        """
        body = msgspec.json.encode({"tool": tool, "version": version})
        found = (await self._registry(Rpc.tools_get(self.principal), body, timeout_s)).descriptor
        assert found is not None
        self._described[(tool, version)] = found
        self._described_at[(tool, version)] = time.monotonic()
        return found

    async def _registry(self, subject: str, body: bytes, timeout_s: float) -> ToolsReply:
        try:
            reply = await self._nc.request(subject, body, timeout=timeout_s)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
            raise RegistryNoAnswer(f"no answer on {subject}: {error!r}") from None
        listing = msgspec.json.decode(reply.data, type=ToolsReply)
        if not listing.ok:
            raise (UnknownTool if listing.reason_code == "unknown_tool" else RegistryUnavailable)(listing.reason)
        return listing

    async def submit(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        version: str | None = None,
        request_id: str | None = None,
    ) -> str:
        """Publish one tool request and return its request id (the receipt comes later).

        A request larger than the server's payload limit (``max_payload``) is not sent: its
        receipt, made here and unsigned, ends it ``refused`` with reason code ``oversized``
        (as the policy refuses one over its own limit).

        Secret arguments of the operation (``writeOnly``) are sealed to the executor first
        (:mod:`toolgate.sdk.sealing`), which takes one lookup of the descriptor. When the
        lookup gets no answer (the policy service is down), the descriptor this client last
        saw for the tool is used, so a request still goes into the stream and waits there.

        Raises:
            ValueError: an argument has no canonical JSON form (e.g. an integer beyond
                ±(2**53 − 1)); the gateway would refuse it, so it is not sent.
            SealingKeyMissing: the operation has secret arguments and no sealing key is set.
            RegistryUnavailable: the lookup was refused, or got no answer for a tool this
                client never saw (:class:`RegistryNoAnswer`, also a ``nats.errors.Error``):
                which arguments are secret is unknown, so nothing is sent.
            nats.errors.TimeoutError: the stream did not confirm the request.
            DuplicateRequest: ``request_id`` was submitted before (inside the duplicate window).
            GatewayStoreFull: the gateway's stream is full: the request was not accepted
                (nothing runs, no receipt comes).
        """
        if problem := unrepresentable(arguments):
            raise ValueError(f"argument value at {problem}")
        arguments = await self._sealed(tool, operation, arguments, version, idempotency_key)
        request_id = request_id or uuid.uuid4().hex
        request = ToolRequested(
            event_id=request_id,
            occurred_at=datetime.now(UTC),
            request_id=request_id,
            tool=tool,
            operation=operation,
            arguments=arguments,
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            version=version,
        )
        self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        while len(self._waiting) > MAX_UNCLAIMED:
            self._forget(next(iter(self._waiting)))  # its receipt, if asked for, is read from the stream
        if self._subscription is not None:  # subscribed before the request is sent: its receipt is heard
            self._covered[request_id] = self._reconnects()
        headers = with_trace_context({"Nats-Msg-Id": request_id})  # the stream drops a second request by its id
        try:
            ack = await self._js.publish(
                Subjects.request(self.principal), encode(request), stream=STREAM, headers=headers
            )
        except nats.errors.MaxPayloadError:
            self._forget(request_id)
            self._arrived[request_id] = oversized_receipt(request, self.principal, self._nc.max_payload)
            return request_id
        except APIError as error:
            self._forget(request_id)
            if (limit := store_full(error)) is not None:
                raise GatewayStoreFull(request_id, limit) from None
            raise
        if ack.duplicate:
            self._forget(request_id)
            raise DuplicateRequest(f"the stream already holds a request with id {request_id!r}")
        return request_id

    async def _sealed(
        self, tool: str, operation: str, arguments: dict[str, Any], version: str | None, key: str | None
    ) -> dict[str, Any]:
        if not TOOL_NAME.match(tool) or (version is not None and not SEMVER.match(version)):
            return arguments  # the policy refuses the name before it looks at any argument
        descriptor = self._fresh(tool, version)
        if descriptor is None:
            try:
                descriptor = await self.describe(tool, version)
            except UnknownTool:
                return arguments  # nothing is known secret; the policy denies the unknown tool
            except RegistryNoAnswer:
                if (tool, version) not in self._described:
                    raise
                descriptor = self._described[(tool, version)]  # the last one seen: the request still goes in
        return self._sealer.seal_arguments(descriptor, operation, arguments, key)

    def _fresh(self, tool: str, version: str | None) -> ToolDescriptor | None:
        """The descriptor this client saw less than ``descriptor_max_age_s`` ago, else ``None`` (ask again).

        Which arguments are secret rarely changes; when it does, a call sealed by the old
        descriptor within that time is refused by the policy (``secret_not_sealed`` or
        ``sealed_unexpected``), never run, and its receipt makes this client ask again.
        """
        seen = self._described_at.get((tool, version))
        if seen is None or time.monotonic() - seen >= self.descriptor_max_age_s:
            return None
        return self._described[(tool, version)]

    async def receipt(self, request_id: str, timeout_s: float = 60.0) -> ReceiptIssued:
        """Wait up to ``timeout_s`` seconds for the receipt of ``request_id``.

        A result kept out of band (``result_ref``) is fetched and put into ``result``; if
        it cannot be read back, the receipt is returned as is (``result`` None) and a
        warning is logged — :meth:`fetch_result` raises the reason. So are a whole reason
        and redactions list kept out of band (``detail_ref``: the receipt carries them cut,
        :mod:`toolgate.contracts.receipt_detail`); unreadable, the cut ones stay.

        Raises:
            TimeoutError: no receipt in time (the request may still be pending approval).
        """
        issued = await self._receipt(request_id, timeout_s)
        if issued.reason_code in _SEALING_REFUSED:  # sealed by a descriptor that changed: ask again next time
            self._described_at = {seen: at for seen, at in self._described_at.items() if seen[0] != issued.tool}
        return await self._with_result(issued)

    async def _receipt(self, request_id: str, timeout_s: float) -> ReceiptIssued:
        """The receipt from the subscription; read from the stream only where the subscription may have missed it.

        The rule: the stream is read (a direct get of the subject's last message) when the
        request was not submitted through this client's subscription (another client or an
        earlier process sent it), when the connection was re-made since the subscription was
        last known to cover it (core NATS delivers nothing while disconnected: checked every
        :data:`RECONNECT_LOOK_S`), and once more when the wait times out. A request this
        client submitted is published after its subscription, on the same connection, so its
        receipt is delivered: no stream read on the ordinary path.
        """
        if request_id in self._arrived:
            return self._arrived.pop(request_id)
        future = self._waiting.setdefault(request_id, asyncio.get_running_loop().create_future())
        deadline = asyncio.get_running_loop().time() + timeout_s
        try:
            found = await self._awaited(request_id, future, deadline)
            return found if found is not None else await self._last_look(request_id, timeout_s)
        finally:
            self._forget(request_id)

    async def _awaited(
        self, request_id: str, future: asyncio.Future[ReceiptIssued], deadline: float
    ) -> ReceiptIssued | None:
        """The receipt heard or read before ``deadline`` (loop time), else ``None``."""
        while not future.done():
            if self._may_have_missed(request_id) and (stored := await self._stored(request_id)) is not None:
                return stored
            remaining_s = deadline - asyncio.get_running_loop().time()
            if remaining_s <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), min(remaining_s, RECONNECT_LOOK_S))
        return future.result()

    async def _last_look(self, request_id: str, timeout_s: float) -> ReceiptIssued:
        """A receipt the subscription dropped (a slow consumer) is still found in the stream; else time out."""
        if self._nc.is_connected and (stored := await self._stored(request_id)) is not None:
            return stored
        raise TimeoutError(
            f"no receipt for request {request_id} within {timeout_s:g} s: it may still be waiting "
            "for an approval (ask again with receipt(); the receipt is kept in the stream)"
        )

    def _may_have_missed(self, request_id: str) -> bool:
        """Whether the subscription may have missed the receipt since it was last looked for (marks it looked for)."""
        reconnects = self._reconnects()
        missed = self._covered.get(request_id) != reconnects
        self._covered[request_id] = reconnects
        return missed

    def _reconnects(self) -> int:
        return int(self._nc.stats["reconnects"])

    def _forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)
        self._covered.pop(request_id, None)

    async def _with_result(self, issued: ReceiptIssued) -> ReceiptIssued:
        if issued.detail_ref is not None:
            issued = await self._with_detail(issued, issued.detail_ref)
        if issued.result_ref is None:
            return issued
        try:
            return msgspec.structs.replace(issued, result=await self.fetch_result(issued.result_ref))
        except ResultUnavailable as error:
            log.warning("receipt %s: %s", issued.request_id, error)
            return issued

    async def _with_detail(self, issued: ReceiptIssued, ref: ResultRef) -> ReceiptIssued:
        """``issued`` with its whole reason and redactions, when they were kept out of band and can be read."""
        try:
            return with_detail(issued, await read_detail(self._js, ref))
        except ResultUnavailable as error:
            log.warning("receipt %s: its whole reason cannot be read: %s", issued.request_id, error)
            return issued

    async def fetch_result(self, ref: ResultRef) -> Any:
        """Read a result kept out of band (:func:`toolgate.sdk.results.read_result`).

        Raises:
            ResultUnavailable: a chunk is missing, or the bytes do not match the receipt's
                size and SHA-256.
        """
        return await read_result(self._js, ref)

    async def _stored(self, request_id: str) -> ReceiptIssued | None:
        subject = Subjects.receipt(self.principal, request_id)
        try:
            stored = await self._js.get_last_msg(catalog.STREAM, subject, direct=True)
        except nats.errors.Error:
            return None
        return self._mine(subject, self._receipts.verified(stored.data or b""))

    def _mine(self, subject: str, issued: ReceiptIssued | None) -> ReceiptIssued | None:
        """``issued`` if it is this principal's receipt of the request its subject names, else ``None``.

        A receipt the executor really signed, but for another principal or request, copied onto
        this subject (a server reply sent to a chosen subject can do that) is not an answer.
        """
        if issued is None or subject != Subjects.receipt(self.principal, issued.request_id):
            return None
        return issued if issued.principal == self.principal else None

    async def invoke(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        version: str | None = None,
        timeout_s: float = 60.0,
    ) -> ReceiptIssued:
        """Submit one call and wait for its receipt.

        Returns:
            The receipt. One that ends ``denied`` with reason code ``rate_limited`` carries
            ``retry_after_s``: seconds until the same call would fit the rate again. One that
            ends ``replayed`` (the key completed before; nothing ran again) carries the stored
            outcome in ``replay_outcome`` and its reason code, reason and result whole:
            :func:`toolgate.sdk.ended_as` gives how the call ended either way.

        Raises:
            TimeoutError: no receipt within ``timeout_s`` seconds.
            GatewayStoreFull: the gateway's stream is full: the request was not accepted.
        """
        request_id = await self.submit(tool, operation, arguments, idempotency_key=idempotency_key, version=version)
        return await self.receipt(request_id, timeout_s)

    def approval_id(self, request_id: str) -> str:
        """The id ``ap-<12 hex>`` of the approval ``request_id`` opens when it needs one.

        A request that joined another pending approval of the same call (same idempotency
        key and arguments) is answered by that approval instead; an answer given on this id
        still reaches it. :meth:`approval` names the approval the request waits on, and the
        receipt names it too (``approval_id``).
        """
        return approval_id_for(self.principal, request_id)

    async def approval(self, request_id: str, timeout_s: float = 5.0) -> ApprovalStatus:
        """The approval ``request_id`` waits on (or waited on), as the approvals service holds it.

        Returns:
            ``ok`` with its state (``pending``, ``granted``, ``rejected``, ``expired``),
            ``approval_id`` (its own, or the one it joined: ``joined``), votes and quorum;
            else ``not_open`` (not decided yet, or its approval opens in a moment: ask again),
            ``no_approval`` (none and never: it needs none, ended, or is unknown),
            ``index_lost`` or ``approval_store_unavailable`` (transient).

        Raises:
            ApprovalsNoAnswer: no answer within ``timeout_s`` seconds.
        """
        return await standing.approval_status(self._nc, self.principal, request_id, timeout_s)

    async def decision(self, request_id: str) -> DecisionMade | None:
        """The policy's decision on ``request_id`` of this principal, as stored in the stream.

        Returns:
            The decision (``verdict`` ``needs_approval``: the call waits for
            :meth:`approval_id`), or ``None``: not decided yet, unknown, or not signed by the
            policy's key (when ``policy.pub`` is in the public keys directory).

        Raises:
            nats.errors.TimeoutError: the stream did not answer.
        """
        return await standing.stored_decision(self._js, self.principal, request_id, self._decisions)

    async def withdraw(self, request_id: str, timeout_s: float = 5.0) -> WithdrawReply:
        """Withdraw ``request_id`` while its approval is pending: it then ends ``denied`` (``withdrawn``).

        Returns:
            The approvals service's answer: ``ok`` with ``withdrawn`` (its receipt follows), or
            ``not_pending`` (not awaiting approval: never submitted, already granted — a
            running call is not interrupted — rejected, expired or withdrawn), ``not_open``
            (not decided yet, or its approval opens in a moment), ``malformed``,
            ``index_lost`` or ``approval_store_unavailable`` (the last three transient: ask again).

        Raises:
            ApprovalsNoAnswer: no answer within ``timeout_s`` seconds.
        """
        return await standing.withdraw(self._nc, self.principal, request_id, timeout_s)
