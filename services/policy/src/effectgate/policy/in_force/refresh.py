"""Following the registry: the engine is rebuilt when the registered tools change.

Policies read ``context.args`` through a vocabulary generated from the registered input schemas
(:mod:`effectgate.policy.cedar.args_schema`), so a newly published tool version can widen it,
and a policy that read an argument no tool provided yet can build once one does.
"""

from __future__ import annotations

import asyncio
import logging

from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor
from effectgate.policy.in_force.holder import PolicyHolder

__all__ = ["follow_registry", "refresh_once"]

log = logging.getLogger("effectgate.policy")

Listed = tuple[tuple[str, str], ...]


async def refresh_once(holder: PolicyHolder, descriptors: DescriptorSource, seen: Listed | None) -> Listed | None:
    """One look at the registry; returns what was seen (``seen`` again when it cannot be read)."""
    try:
        listed: list[ToolDescriptor] = await descriptors.list()
    except Exception as error:  # the registry is down: the engine in force stays
        log.warning("registry not readable to refresh the policy's argument vocabulary: %r", error)
        return seen
    key = tuple((d.name, d.version) for d in listed)
    if key != seen or holder.engine is None:
        holder.rebuild(listed)
    return key


async def follow_registry(holder: PolicyHolder, descriptors: DescriptorSource, interval_s: float) -> None:
    """Refresh every ``interval_s`` seconds until cancelled."""
    seen: Listed | None = None
    while True:
        seen = await refresh_once(holder, descriptors, seen)
        await asyncio.sleep(interval_s)
