"""Following the registry: the engine is rebuilt when the registered tools change.

Policies read ``context.args`` through a vocabulary generated from the registered input
schemas (:mod:`toolgate.policy.args_schema`), so a newly published tool version can widen
it, and a policy that read an argument no tool provided yet can build once one does.
Every ``interval_s`` the latest version of each tool is listed; when the set of
``(tool, version)`` changed, or no engine is in force, the policy text is built again
(:meth:`PolicyHolder.rebuild`: a text that does not build leaves the engine in force).
"""

from __future__ import annotations

import asyncio
import logging

from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.policy.holder import PolicyHolder
from toolgate.policy.ports import DescriptorSource

__all__ = ["follow_registry", "refresh_once"]

log = logging.getLogger("toolgate.policy")

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
