"""What ``effectgate policy …`` reads from a running stack: the audit chain, the registry, the policy bucket.

Everything is read as the CLI's identity (the operator): the audit chain through
``tg.audit.export`` / ``tg.audit.trail``, descriptors through ``tg.registry.{get,list}``,
published policy texts from the policy bucket (``EFFECTGATE_POLICY``, read-only for the
operator).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from effectgate.cli.client import rpc
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.rpc.audit import EXPORT_PAGE, ExportQuery, ExportReply, TrailQuery, TrailReply
from effectgate.contracts.rpc.policy import PublishReply, PublishRequest
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.shared.stores.policy_kv import PolicyBucket, PublishedPolicy

__all__ = [
    "PUBLISH_TIMEOUT_S",
    "chain",
    "descriptor",
    "descriptors",
    "in_force",
    "publish",
    "published",
    "registered",
    "trail",
]

PUBLISH_TIMEOUT_S = 30.0
"""How long ``policy publish`` waits for the policy service (it builds and validates the policy), seconds."""


async def publish(bus: rpc.Bus, text: str) -> PublishReply:
    """Ask the policy service to put ``text`` in force; its answer."""
    return await rpc.ask(bus, Rpc.POLICY_PUBLISH, PublishRequest(text=text), PublishReply, PUBLISH_TIMEOUT_S)


async def chain(bus: rpc.Bus) -> list[dict[str, Any]]:
    """Every audit record, in chain order (``tg.audit.export`` pages).

    Raises:
        rpc.BusError: the audit service refused a page.
    """
    records: list[dict[str, Any]] = []
    while True:
        after = int(records[-1]["sequence"]) if records else 0
        query = ExportQuery(after=after, limit=EXPORT_PAGE)
        reply = await rpc.ask(bus, Rpc.AUDIT_EXPORT, query, ExportReply, timeout_s=30)
        if not reply.ok:
            raise rpc.BusError(f"the audit service refused the export: {reply.reason}")
        if not reply.records:
            return records
        records.extend(msgspec.to_builtins(reply.records))


async def trail(bus: rpc.Bus, request_id: str) -> list[dict[str, Any]]:
    """Every audit record of ``request_id``, in bus order."""
    reply = await rpc.ask(bus, Rpc.AUDIT_TRAIL, TrailQuery(request_id=request_id), TrailReply)
    return list(msgspec.to_builtins(reply.records))


async def registered(bus: rpc.Bus) -> list[ToolDescriptor]:
    """The latest version of every registered tool."""
    reply = await rpc.listing(bus)
    return msgspec.convert(reply.get("descriptors") or [], list[ToolDescriptor])


async def descriptor(bus: rpc.Bus, tool: str, version: str | None) -> ToolDescriptor | None:
    """``tool`` at ``version`` (``None``: the latest), or ``None`` when the registry has none."""
    reply = await rpc.request(bus, Rpc.REGISTRY_GET, {"tool": tool, "version": version})
    found = reply.get("descriptor") if reply.get("ok") else None
    return msgspec.convert(found, ToolDescriptor) if found else None


async def descriptors(
    bus: rpc.Bus, wanted: Iterable[tuple[str, str | None]]
) -> dict[tuple[str, str | None], ToolDescriptor | None]:
    """Each wanted ``(tool, version)`` from the registry."""
    return {(tool, version): await descriptor(bus, tool, version) for tool, version in wanted}


async def published(bus: rpc.Bus, version: str) -> PublishedPolicy | None:
    """The published policy of ``version`` from the policy bucket, or ``None``."""
    return await (await PolicyBucket.open(bus.jetstream())).version(version)


async def in_force(bus: rpc.Bus) -> PublishedPolicy | None:
    """The policy in force (``current``), or ``None``."""
    return (await (await PolicyBucket.open(bus.jetstream())).current()).policy
