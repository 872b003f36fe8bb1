"""``ToolClient``: how an agent calls tools through effectgate.

The agent's principal is the token of the subject it publishes on (``tg.req.<principal>``);
with NATS permissions it can publish nowhere else, so the principal is proven by the transport,
not claimed in the body.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import msgspec
import nats
from nacl.public import PublicKey
from nats.aio.client import Client

from effectgate.contracts.bus.catalog import TOKEN, Rpc
from effectgate.contracts.bus.paging import PageQuery
from effectgate.contracts.errors import described
from effectgate.contracts.events import ReceiptIssued, ResultRef
from effectgate.contracts.rpc.listing import ToolsReply
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.sdk import standing
from effectgate.sdk.connecting import connect_agent
from effectgate.sdk.descriptors import DescriptorCache
from effectgate.sdk.listing import every_tool, registry_reply
from effectgate.sdk.progress import OnProgress, followed
from effectgate.sdk.receipts import ReceiptVerifier
from effectgate.sdk.records import RecordReader
from effectgate.sdk.results import filled_in, read_result
from effectgate.sdk.sealing import Sealer, find_sealing_key
from effectgate.sdk.submitting import Submitter
from effectgate.sdk.waiting import ReceiptWaiter

__all__ = ["ToolClient"]

log = logging.getLogger("effectgate.sdk")


class ToolClient(standing.Standing):
    """An agent's connection to effectgate.

    Use ``async with await ToolClient.connect(url, principal, public_keys=…) as client``.
    Where its calls stand (:meth:`decision`, :meth:`approval`, :meth:`withdraw`,
    :meth:`approval_id`) it has from :class:`~effectgate.sdk.standing.Standing`.

    Args:
        nc: a connected NATS client.
        principal: the agent's principal (the token of ``tg.req.<principal>``).
        receipts: what the client believes on its receipts subject (:mod:`effectgate.sdk.receipts`).
        sealing_key: the executor's sealing public key (secret arguments).
        decisions: what the client believes of a stored decision (:mod:`effectgate.sdk.standing`);
            default: the policy's ``policy.pub`` in ``$EFFECTGATE_PUBLIC_KEYS_DIR`` if it is there.
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
        self._nc, self.principal, self._records = nc, principal, RecordReader(nc, principal)
        self._decisions = decisions or standing.DecisionVerifier.from_directory(None)
        self._descriptors = DescriptorCache()
        self._waiter = ReceiptWaiter(nc, principal, receipts)
        sealer = Sealer(sealing_key if sealing_key is not None else find_sealing_key())
        self._submitter = Submitter(nc, principal, self._waiter, sealer, self._descriptors, self.describe)

    @property
    def descriptor_max_age_s(self) -> float:
        """How long a descriptor looked up is used to seal arguments without asking again (seconds)."""
        return self._descriptors.max_age_s

    @descriptor_max_age_s.setter
    def descriptor_max_age_s(self, seconds: float) -> None:
        self._descriptors.max_age_s = seconds

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

        The first connection is tried quietly over about 5 s; a lost one is retried 30 times one
        second apart, each failure logged (:func:`effectgate.sdk.connecting.connect_agent`).

        Args:
            url: the NATS server (``effectgate up`` prints it).
            principal: the agent's principal (it publishes on ``tg.req.<principal>``).
            credentials: a credentials file (``.effectgate/credentials/agent-<principal>.json``,
                :mod:`effectgate.contracts.bus.nats_credentials`): its user, password and inbox prefix.
            public_keys: directory of the gateway's public keys (``effectgate up``:
                ``.effectgate/keys/public``; default ``$EFFECTGATE_PUBLIC_KEYS_DIR``): the
                executor's ``receipts.pub`` verifies receipts, its ``sealing.pub`` is what
                secret arguments are sealed to, the policy's ``policy.pub`` verifies
                stored decisions (:meth:`decision`).
            verify_receipts: ``False`` accepts unsigned receipts (logged loudly; never in production).
            sealing_key: the executor's sealing public key (base64) instead of ``sealing.pub``
                (:mod:`effectgate.sdk.sealing` names the environment fallbacks).
            options: more ``nats.connect`` options; they win over the file's.

        Raises:
            ReceiptKeyMissing: no ``receipts.pub`` and ``verify_receipts`` is true.
            CredentialsInvalid: the credentials file is missing, unreadable, readable by others or malformed.
            ValueError: ``receipts.pub`` is not a base64 Ed25519 public key; the credentials
                file is another agent's (``agent-<other>``), or not an agent's.
            PermissionError: the server refused the credentials (at once, not after the retries).
            BusUnreachable: the server could not be reached (also a ``nats.errors.NoServersError``).
            OSError / ValueError: a sealing key is named but unreadable or invalid.
        """
        public_keys = Path(public_keys) if public_keys is not None else None
        receipts = ReceiptVerifier.from_directory(public_keys, verify_receipts)
        sealer_key = find_sealing_key(public_keys, sealing_key)
        nc = await connect_agent(url, principal, credentials, **options)
        decisions = standing.DecisionVerifier.from_directory(public_keys)
        client = cls(nc, principal, receipts, sealing_key=sealer_key, decisions=decisions)
        await client.start()
        return client

    async def start(self) -> None:
        """Subscribe to this principal's receipts."""
        await self._waiter.start()

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
        service answers in pages (:mod:`effectgate.sdk.listing`).

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
        return await registry_reply(self._nc, Rpc.tools_list(self.principal), msgspec.json.encode(query), timeout_s)

    async def describe(self, tool: str, version: str | None = None, timeout_s: float = 5.0) -> ToolDescriptor:
        """One tool's descriptor as this principal sees it (``version=None``: the latest).

        Raises:
            RegistryUnavailable: no answer, or no such tool for this principal (a tool it
                may not call is answered exactly like one that does not exist).
        """
        body = msgspec.json.encode({"tool": tool, "version": version})
        found = (await registry_reply(self._nc, Rpc.tools_get(self.principal), body, timeout_s)).descriptor
        assert found is not None
        self._descriptors.keep(tool, version, found)
        return found

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

        A request over the server's ``max_payload`` is not sent: its receipt, made here and
        unsigned, ends it ``refused``/``oversized``. Secret arguments are sealed to the executor
        first, by the tool's descriptor (:mod:`effectgate.sdk.submitting`).

        Raises:
            ValueError: an argument has no canonical JSON form (e.g. an integer beyond
                ±(2**53 − 1)); the gateway would refuse it, so it is not sent.
            SealingKeyMissing: the operation has secret arguments and no sealing key is set.
            SchemaUnusable: the input schema marks a secret where it cannot be sealed: nothing is sent.
            RegistryUnavailable: the lookup was refused, or got no answer for a tool this
                client never saw (:class:`RegistryNoAnswer`, also a ``nats.errors.Error``):
                which arguments are secret is unknown, so nothing is sent.
            nats.errors.TimeoutError: the stream did not confirm the request.
            DuplicateRequest: ``request_id`` was submitted before (inside the duplicate window).
            GatewayStoreFull: the gateway's stream is full: the request was not accepted
                (nothing runs, no receipt comes).
        """
        return await self._submitter.submit(
            tool, operation, arguments, idempotency_key, version, request_id or uuid.uuid4().hex
        )

    async def receipt(self, request_id: str, timeout_s: float = 60.0) -> ReceiptIssued:
        """Wait up to ``timeout_s`` seconds for the receipt of ``request_id``.

        A result kept out of band (``result_ref``) is fetched and put into ``result``; if
        it cannot be read back, the receipt is returned as is (``result`` None) and a
        warning is logged — :meth:`fetch_result` raises the reason. So are a whole reason
        and redactions list kept out of band (``detail_ref``: the receipt carries them cut,
        :mod:`effectgate.contracts.receipt_detail`); unreadable, the cut ones stay.

        Raises:
            TimeoutError: no receipt in time (the request may still be pending approval).
        """
        issued = await self._waiter.receipt(request_id, timeout_s)
        self._descriptors.heard(issued)  # sealed by a descriptor that changed: ask again next time
        return await filled_in(self._records, issued)

    async def fetch_result(self, ref: ResultRef) -> Any:
        """Read a result kept out of band (:func:`effectgate.sdk.results.read_result`).

        Raises:
            ResultUnavailable: a chunk is missing, or the bytes do not match the receipt's
                size and SHA-256.
        """
        return await read_result(self._records, ref)

    async def invoke(
        self,
        tool: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        version: str | None = None,
        timeout_s: float = 60.0,
        on_progress: OnProgress | None = None,
    ) -> ReceiptIssued:
        """Submit one call and wait for its receipt; ``on_progress(items, message)`` hears a streaming call run.

        ``on_progress`` is listening before the request is sent and is never called after this
        returns (:meth:`progress`).

        Returns:
            The receipt. One that ends ``denied`` with reason code ``rate_limited`` carries
            ``retry_after_s``: seconds until the same call would fit the rate again. One that
            ends ``replayed`` (the key completed before; nothing ran again) carries the stored
            outcome in ``replay_outcome`` and its reason code, reason and result whole:
            :func:`effectgate.sdk.ended_as` gives how the call ended either way. A replay of an
            ``uncertain`` call carries its resolution since (``resolution``, ``resolution_id``):
            :func:`effectgate.sdk.resolved_as` gives ``ran``, ``not_run``, ``unknown`` or ``None``.

        Raises:
            TimeoutError: no receipt within ``timeout_s`` seconds.
            GatewayStoreFull: the gateway's stream is full: the request was not accepted.
        """
        request_id = uuid.uuid4().hex
        following = self.progress(request_id, on_progress) if on_progress else contextlib.nullcontext()
        async with following:
            await self.submit(
                tool, operation, arguments, idempotency_key=idempotency_key, version=version, request_id=request_id
            )
            return await self.receipt(request_id, timeout_s)

    def progress(self, request_id: str, on_progress: OnProgress) -> AbstractAsyncContextManager[None]:
        """``async with client.progress(request_id, on_progress):`` hears how far a streaming call is.

        ``on_progress(items, message)`` (a function or a coroutine function) is called for each
        progress the executor relays on ``tg.progress.<principal>.<request_id>`` while the block
        runs, never after it (core NATS: what was published before is not heard). What it raises
        is logged (:mod:`effectgate.sdk.progress`).
        """
        return followed(self._nc, self.principal, request_id, on_progress)
