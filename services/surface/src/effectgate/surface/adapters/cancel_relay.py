"""Cancellations relayed over NATS, so the replica that holds a call hears a cancel sent to another.

Core NATS (not in the stream): ``tg.mcp.cancel.<principal>`` with ``{"client": …, "id": …}``.
Only the surface's own user may publish or subscribe there; the principal is the subject's
token, set by the replica that authenticated the notification.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Subjects, token_of
from effectgate.surface.cancels import Cancels, call_of

__all__ = ["CancelRelay"]

log = logging.getLogger("effectgate.surface.cancels")


class _Cancel(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    client: str
    id: str | int


_decode = msgspec.json.Decoder(_Cancel)


class CancelRelay:
    """Publishes this replica's cancellations and applies every replica's."""

    def __init__(self, nc: Client, cancels: Cancels) -> None:
        self._nc, self.cancels = nc, cancels

    async def start(self) -> None:
        """Subscribe to every principal's cancellations."""
        await self._nc.subscribe(Subjects.MCP_CANCELS, cb=self._heard)

    async def cancel(self, principal: str, client: str, rpc_id: Any) -> None:
        """Cancel the call here if held here, and tell the other replicas."""
        if not isinstance(rpc_id, str | int) or isinstance(rpc_id, bool):
            return
        self.cancels.cancel(call_of(principal, client, rpc_id))
        body = msgspec.json.encode(_Cancel(client=client, id=rpc_id))
        await self._nc.publish(Subjects.mcp_cancel(principal), body)

    async def _heard(self, msg: Msg) -> None:
        principal = token_of(Subjects.MCP_CANCELS, msg.subject)
        try:
            cancel = _decode.decode(msg.data)
        except msgspec.DecodeError:
            log.warning("a cancellation that is no cancellation on %s: dropped", msg.subject)
            return
        if principal is not None:
            self.cancels.cancel(call_of(principal, cancel.client, cancel.id))
