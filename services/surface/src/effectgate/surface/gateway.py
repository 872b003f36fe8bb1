"""One MCP ``tools/call`` as one governed request: send it once, wait briefly, answer with its receipt."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
from mcp_types import CallToolResult, TextContent

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.events import DecisionMade, ReceiptIssued
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.replays import ended_as
from effectgate.contracts.rpc.approvals import WithdrawReply
from effectgate.sdk import DuplicateRequest, GatewayStoreFull, RecordsNoAnswer, ToolClient
from effectgate.surface.calls import CLIENT_KEY, CallEntry, arguments_digest, call_key, fresh_entry, reusable, settled
from effectgate.surface.holding import Client, Declined, Waiting, asked_while_waiting, waiting_for
from effectgate.surface.listings import Listing, Listings
from effectgate.surface.ports import AgentClients, CallLedger
from effectgate.surface.progress import Reporter
from effectgate.surface.results import as_result, boundary, pending_result, problem_result
from effectgate.surface.shaping import Target, is_mcp

__all__ = ["Gateway", "UnknownName"]

log = logging.getLogger("effectgate.surface.gateway")

_WITHDRAW_TRIES = 5

_KEY_REUSED = (
    f"refused (idempotency_key_reused): this _meta[{CLIENT_KEY!r}] was used before for another tool or with "
    "other arguments. "
    "Use a new key for a new call."
)


class UnknownName(LookupError):
    """No tool of that name in the principal's listing."""


class Gateway:
    """The call flow (module docstring)."""

    def __init__(self, agents: AgentClients, listings: Listings, ledger: CallLedger, waiting: Waiting) -> None:
        self._agents, self._listings, self._ledger, self._waiting = agents, listings, ledger, waiting

    async def listing(self, principal: str) -> Listing:
        """``principal``'s tools (:meth:`effectgate.surface.listings.Listings.of`)."""
        return await self._listings.of(principal)

    async def call(
        self, principal: str, name: str, arguments: dict[str, Any], client_key: str | None, asking: Client
    ) -> CallToolResult:
        """Run one ``tools/call`` of ``principal`` (module docstring).

        Raises:
            UnknownName: ``name`` is not in the principal's listing.
        """
        target = (await self._listings.of(principal)).targets.get(name)
        if target is None:
            raise UnknownName(name)
        if problem := unrepresentable(arguments):  # 1e400, NaN, a big integer, too deep: named by its pointer
            return problem_result(f"refused: argument value at {problem}")
        try:
            key, digest = call_key(principal, name, arguments, client_key), arguments_digest(name, arguments)
        except ValueError as error:
            return problem_result(f"refused: {error}")
        client = await self._agents.client(principal)
        entry = await self._claimed(key, target, client_key, digest)
        if entry.arguments_digest != digest:
            return problem_result(_KEY_REUSED)
        async with self._reporting(client, entry.request_id, asking) as reporter:
            if not entry.published:
                try:
                    entry = await self._send(client, key, target, arguments, entry)
                except GatewayStoreFull as full:  # not accepted: an identical call sends it again
                    return problem_result(f"not accepted (gateway_store_full): {full}")
            return await self._outcome(client, key, target, entry, asking, reporter)

    async def _claimed(self, key: str, target: Target, client_key: str | None, digest: str) -> CallEntry:
        fresh = fresh_entry(key, target.read_only, client_key, digest)
        grace = self._waiting.grace_s
        entry, _new = await self._ledger.claim(
            key, fresh, lambda found: reusable(found, time.time(), grace, client_key is not None)
        )
        return entry

    async def _send(
        self, client: ToolClient, key: str, target: Target, arguments: dict[str, Any], entry: CallEntry
    ) -> CallEntry:
        with contextlib.suppress(DuplicateRequest):  # a replica that died after publishing: the stream holds it
            await client.submit(
                target.tool,
                target.operation,
                arguments,
                idempotency_key=entry.idempotency_key,
                version=target.version,
                request_id=entry.request_id,
            )
        published = msgspec.structs.replace(entry, published=True)
        await self._ledger.put(key, published)
        return published

    async def _outcome(
        self, client: ToolClient, key: str, target: Target, entry: CallEntry, asking: Client, reporter: Reporter | None
    ) -> CallToolResult:
        try:
            receipt = await self._held(client, entry.request_id, asking, reporter)
        except Declined:
            await self._withdraw(client, key, entry)
            receipt = await self._held(client, entry.request_id, Client(), None)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(client, key, entry)
            raise
        if receipt is None:
            return await self._pending(client, entry.request_id)
        await self._ledger.put(key, settled(entry, ended_as(receipt).value, receipt.reason_code, time.time()))
        schema = target.spec.output_schema.get("type") == "object"
        return as_result(receipt, is_mcp(target.adapter), schema, self._waiting.limit_bytes)

    @contextlib.asynccontextmanager
    async def _reporting(self, client: ToolClient, request_id: str, asking: Client) -> AsyncIterator[Reporter | None]:
        """The call's progress to a client that asked for it (else ``None``): its waits, a streaming call's items.

        The items come on ``tg.progress.<principal>.<request_id>``, heard as the principal
        (:meth:`ToolClient.progress`) from before the request is sent; nothing is sent once the block ended.
        """
        if asking.progress is None:
            yield None
            return
        reporter = Reporter(asking.progress, self._waiting.hold_s)
        async with client.progress(request_id, reporter.heard):
            try:
                yield reporter
            finally:
                await reporter.close()

    async def _held(
        self, client: ToolClient, request_id: str, asking: Client, reporter: Reporter | None
    ) -> ReceiptIssued | None:
        """The receipt within ``hold_s``, or ``None``; asks the person once when the call waits for an approval.

        Raises:
            Declined: the person chose to withdraw the call.
        """
        started, approval = time.monotonic(), None
        while (left := self._waiting.hold_s - (time.monotonic() - started)) > 0:
            try:
                return await client.receipt(request_id, timeout_s=min(self._waiting.progress_s, left))
            except TimeoutError:
                pass
            if approval is None and await self._awaits_approval(client, request_id):
                approval = client.approval_id(request_id)
                left = self._waiting.hold_s - (time.monotonic() - started)
                if (found := await asked_while_waiting(client, request_id, asking, approval, left)) is not None:
                    return found
            if reporter is not None:
                elapsed = time.monotonic() - started
                await reporter.waited(elapsed, waiting_for(request_id, approval, elapsed))
        return None

    @staticmethod
    async def _awaits_approval(client: ToolClient, request_id: str) -> bool:
        decision = await _decision(client, request_id)
        return decision is not None and decision.verdict == "needs_approval"

    async def _pending(self, client: ToolClient, request_id: str) -> CallToolResult:
        if await self._awaits_approval(client, request_id):
            return pending_result(request_id, client.approval_id(request_id), None)
        return pending_result(request_id, None, None)

    async def _withdraw(self, client: ToolClient, key: str, entry: CallEntry) -> None:
        """Withdraw a cancelled call; asked again while it may still be on its way to an approval.

        Withdrawal answers ``not_open`` (or ``not_pending``) until the approval is open, so a
        cancellation that comes right after the call was sent is tried again (every 0.5 s, up
        to 2 s) while the call is undecided or decided ``needs_approval``; a call decided
        ``execute`` runs on.
        """
        for _ in range(_WITHDRAW_TRIES):
            try:
                answer = await client.withdraw(entry.request_id)
                if answer.reason_code != "not_open" and not await self._again(client, entry.request_id, answer):
                    break
            except Exception as error:  # best effort: the call still ends with its own receipt
                log.warning("request %s: withdrawal not sent: %s", entry.request_id, type(error).__name__)
                return
            await anyio.sleep(0.5)
        if answer.reason_code == "withdrawn":
            await self._ledger.put(key, settled(entry, "denied", "withdrawn", time.time()))
        log.info("request %s cancelled by the client: %s", entry.request_id, answer.reason_code)

    @classmethod
    async def _again(cls, client: ToolClient, request_id: str, answer: WithdrawReply) -> bool:
        """Whether a withdrawal answered ``answer`` may still find the approval open later."""
        return answer.reason_code == "not_pending" and await cls._may_open(client, request_id)

    @staticmethod
    async def _may_open(client: ToolClient, request_id: str) -> bool:
        decision = await _decision(client, request_id)
        return decision is None or decision.verdict == "needs_approval"

    async def result_part(self, principal: str, arguments: dict[str, Any]) -> CallToolResult:
        """Up to ``limit_bytes`` of ``principal``'s own result as JSON, from ``offset_bytes`` (``effectgate_result``).

        Args:
            principal: the caller; only its own receipts can be read (its NATS user reads no other's).
            arguments: ``{"request_id": <token>, "offset_bytes": <int >= 0>}``; anything else is refused.
        """
        request_id, offset = arguments.get("request_id"), arguments.get("offset_bytes", 0)
        if (
            set(arguments) - {"request_id", "offset_bytes"}
            or not isinstance(request_id, str)
            or not TOKEN.match(request_id)
        ):
            return problem_result("refused: effectgate_result takes request_id (a request id) and offset_bytes")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            return problem_result("refused: offset_bytes must be an integer of at least 0")
        client = await self._agents.client(principal)
        try:
            receipt = await client.receipt(request_id, timeout_s=2.0)
        except Exception:  # no answer, or not this principal's: the same refusal
            return problem_result(f"no receipt of request {request_id} is readable for {principal}")
        text = json.dumps(receipt.result, ensure_ascii=False, separators=(",", ":")).encode()
        if offset >= len(text):
            return problem_result(f"refused: offset_bytes {offset} is past the result's {len(text)} bytes")
        start, end = boundary(text, offset), boundary(text, offset + self._waiting.limit_bytes)
        note = f"\n[effectgate: {len(text) - end} more bytes from offset {end}]" if len(text) > end else ""
        return CallToolResult(content=[TextContent(text=text[start:end].decode() + note)])


async def _decision(client: ToolClient, request_id: str) -> DecisionMade | None:
    """``request_id``'s stored decision; ``None`` also when it cannot be read now (no executor answered)."""
    try:
        return await client.decision(request_id)
    except RecordsNoAnswer as error:
        log.warning("request %s: its decision cannot be read now: %s", request_id, error)
        return None
