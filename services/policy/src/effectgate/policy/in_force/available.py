"""The descriptors agents may reach: stored ones whose references dangle are unavailable (fail closed).

A descriptor published before effectgate checked what it refers to
(:func:`effectgate.contracts.tools.references.reference_problem`: an adapter the executor does
not have, an ``amount`` pointer at a string argument, …) stays in the registry's bucket.
"""

from __future__ import annotations

import logging

from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor
from effectgate.contracts.tools.references import reference_problem

__all__ = ["AvailableDescriptors"]

log = logging.getLogger("effectgate.policy")


class AvailableDescriptors:
    """:class:`~effectgate.contracts.tools.descriptors.DescriptorSource` of the descriptors that can be called.

    Args:
        stored: every published descriptor (the registry's bucket).
    """

    def __init__(self, stored: DescriptorSource) -> None:
        self._stored = stored
        self._checked: dict[tuple[str, str], tuple[ToolDescriptor, bool]] = {}  # stored objects are reused

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """``tool`` at ``version`` (``None``: latest) when it is available; ``None`` otherwise."""
        return self._available(await self._stored.get(tool, version))

    async def list(self) -> list[ToolDescriptor]:
        """The latest version of every tool that is available, sorted by name."""
        return [d for d in await self._stored.list() if self._available(d) is not None]

    def _available(self, descriptor: ToolDescriptor | None) -> ToolDescriptor | None:
        if descriptor is None:
            return None
        key = (descriptor.name, descriptor.version)
        seen = self._checked.get(key)
        if seen is None or seen[0] is not descriptor:
            seen = self._checked[key] = (descriptor, self._usable(descriptor, told=seen is not None))
        return descriptor if seen[1] else None

    @staticmethod
    def _usable(descriptor: ToolDescriptor, told: bool) -> bool:
        dangling = reference_problem(descriptor)
        if dangling is not None and not told:
            what = f"{descriptor.name}@{descriptor.version}"
            log.error("tool %s is unavailable to every agent (%s: %s); publish a fixed version", what, *dangling)
        return dangling is None
