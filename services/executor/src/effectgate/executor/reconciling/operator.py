"""The operator's side of reconciliation: the ``uncertain`` calls listed, and one resolved by hand.

``tg.executor.uncertain.list`` reads the receipts from the stream by subject, oldest first, from the
page's cursor (a stream sequence), and lists the ``uncertain`` ones with the resolution that holds
(:func:`~effectgate.executor.reconciling.resolutions.holding`). A page reads at most
:data:`SCAN_MESSAGES` receipts: a page may then hold fewer calls than asked, and ``next`` goes on.

``tg.executor.uncertain.resolve`` takes a :class:`~effectgate.contracts.rpc.uncertain.ResolveCommand`
signed by the operator key (like a tool descriptor published over the bus) and publishes the
:class:`~effectgate.contracts.events.UncertainResolved` it says, ``resolved_by="operator"``, with the
operator's signature. Refused: not signed by the operator key, a request whose receipt is not
``uncertain``, a call already resolved ``ran`` or ``not_run``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus.paging import MAX_CURSOR_CHARS, PageQuery, page_query_of
from effectgate.contracts.events import ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.integrity.signing import signed_by
from effectgate.contracts.rpc.uncertain import ResolveAnswer, ResolveCommand, UncertainCall, UncertainPage
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.ports import Outlet
from effectgate.executor.reconciling.resolutions import holding, resolved_event, settled
from effectgate.shared.consumer.paging import PageFiller, items_budget

__all__ = ["MAX_COMMAND_BYTES", "SCAN_MESSAGES", "UncertainDesk"]

SCAN_MESSAGES = 2_000
"""Receipt messages one page reads at most."""

MAX_COMMAND_BYTES = 4_096
"""Largest resolve command accepted, bytes."""

_command = msgspec.json.Decoder(ResolveCommand)
_ENVELOPE = msgspec.json.encode(
    UncertainPage[UncertainCall](ok=True, reason_code="found", reason="x" * 80, next="x" * MAX_CURSOR_CHARS)
)


@dataclass
class UncertainDesk:
    """Answers the operator's ``uncertain`` requests (module doc).

    Args:
        bus: the stream.
        operator_key: verifies resolve commands (``None``: none is accepted).
        clock: current UTC time.
    """

    bus: Outlet
    operator_key: Ed25519PublicKey | None
    clock: Callable[[], datetime]

    async def list_page(self, data: bytes, max_payload: int) -> UncertainPage[msgspec.Raw]:
        """One page of ``uncertain`` calls for the query in ``data``; never raises for its content.

        Raises:
            nats.errors.Error / OSError: the stream could not be read (the handler answers ``stream_unavailable``).
        """
        query = page_query_of(data)
        if isinstance(query, tuple):
            return UncertainPage(ok=False, reason_code=query[0], reason=query[1])
        if query.after is not None and not query.after.isdigit():
            reason = f"not a cursor of this listing: {query.after!r}"
            return UncertainPage(ok=False, reason_code="malformed", reason=reason)
        return await self._page(query, max_payload)

    async def _page(self, query: PageQuery, max_payload: int) -> UncertainPage[msgspec.Raw]:
        filler, read, seq = PageFiller(items_budget(max_payload, _ENVELOPE), query.limit), 0, int(query.after or 0)
        async for at, receipt in self.bus.receipts_after(seq):
            if read >= SCAN_MESSAGES:
                return _page_of(filler, str(seq))
            read += 1
            if receipt is not None and not await self._offered(filler, at, receipt):
                return _page_of(filler, str(seq))
            seq = at
        return _page_of(filler, None)

    async def _offered(self, filler: PageFiller, seq: int, receipt: ReceiptIssued) -> bool:
        """Offer ``receipt``'s call to the page when it is ``uncertain``; ``False`` when the page is full."""
        if receipt.outcome is not Outcome.UNCERTAIN:
            return True
        return filler.offer(str(seq), msgspec.json.encode(await self._listed(receipt)))

    async def _listed(self, receipt: ReceiptIssued) -> UncertainCall:
        found = holding(await self.bus.resolutions(receipt.principal, receipt.request_id))
        return UncertainCall(
            request_id=receipt.request_id,
            principal=receipt.principal,
            uncertain_at=receipt.occurred_at,
            reason_code=receipt.reason_code,
            tool=receipt.tool,
            version=receipt.version,
            operation=receipt.operation,
            resolution=found.resolution if found else None,
            resolved_by=found.resolved_by if found else None,
            resolution_id=found.event_id if found else None,
            note=found.note if found else "",
        )

    async def resolve(self, data: bytes) -> ResolveAnswer:
        """Publish the operator's resolution in ``data`` (a signed resolve command), or say why not.

        Raises:
            nats.errors.Error / OSError: the stream could not be read or did not confirm.
        """
        if len(data) > MAX_COMMAND_BYTES:
            return _refused("malformed", f"the command is {len(data)} bytes; the limit is {MAX_COMMAND_BYTES}")
        try:
            command = decode_untrusted(_command, data)
        except msgspec.DecodeError as error:
            return _refused("malformed", f"not a resolve command {{request_id, principal, resolution, note}}: {error}")
        if self.operator_key is None or not signed_by(data, self.operator_key):
            return _refused("not_operator", "the command is not signed by the operator key: only the operator resolves")
        return await self._resolved(command)

    async def _resolved(self, command: ResolveCommand) -> ResolveAnswer:
        receipt = await self.bus.receipt(command.principal, command.request_id)
        if receipt is None or receipt.outcome is not Outcome.UNCERTAIN:
            ended = receipt.outcome.value if receipt else "without a receipt"
            return _refused("not_uncertain", f"{command.principal}/{command.request_id} is {ended}, not uncertain")
        if (earlier := settled(await self.bus.resolutions(receipt.principal, receipt.request_id))) is not None:
            why = f"already resolved {earlier.resolution} by the {earlier.resolved_by} ({earlier.event_id})"
            return _refused("already_resolved", why)
        event_id = "rsl_" + sha256_hex({"operator": command.signature}).removeprefix("sha256:")[:32]
        event = resolved_event(
            receipt,
            command.resolution,
            self.clock(),
            event_id,
            resolved_by="operator",
            note=command.note,
            operator_signature=command.signature,
        )
        await self.bus.publish_resolution(event)
        reason = f"{command.principal}/{command.request_id} resolved {command.resolution}"
        return ResolveAnswer(ok=True, reason_code="resolved", reason=reason, resolution_id=event_id)


def _page_of(filler: PageFiller, after: str | None) -> UncertainPage[msgspec.Raw]:
    count = len(filler.items)
    reason = f"{count} uncertain call{'' if count == 1 else 's'}" + (" (more on the next page)" if after else "")
    return UncertainPage(ok=True, reason_code="found", reason=reason, calls=filler.items, next=after)


def _refused(code: str, reason: str) -> ResolveAnswer:
    return ResolveAnswer(ok=False, reason_code=code, reason=reason)
