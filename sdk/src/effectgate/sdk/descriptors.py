"""The descriptors a client looked up, kept to seal arguments by for :data:`DESCRIPTOR_MAX_AGE_S`.

Which arguments of an operation are secret (:mod:`effectgate.sdk.sealing`) is read from the
tool's descriptor, so sealing takes a lookup (``tg.tools.get.<principal>``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.sdk.errors import RegistryNoAnswer, UnknownTool

__all__ = ["DESCRIPTOR_MAX_AGE_S", "SEALING_REFUSED", "DescriptorCache"]

DESCRIPTOR_MAX_AGE_S = 10.0
"""How long a descriptor this client looked up is used to seal arguments without asking again (seconds)."""

SEALING_REFUSED = frozenset({"secret_not_sealed", "sealed_unexpected"})
"""Reason codes of a call refused because it was sealed by a descriptor that changed."""

Describe = Callable[[str, str | None], Awaitable[ToolDescriptor]]
"""Looks a tool (at a version, ``None``: the latest) up; raises as :meth:`effectgate.sdk.ToolClient.describe`."""


class DescriptorCache:
    """Descriptors by ``(tool, version)``, with when each was looked up (monotonic seconds).

    Args:
        max_age_s: how long a descriptor is used without asking again (seconds).
    """

    def __init__(self, max_age_s: float = DESCRIPTOR_MAX_AGE_S) -> None:
        self.max_age_s = max_age_s
        self._seen: dict[tuple[str, str | None], ToolDescriptor] = {}
        self._seen_at: dict[tuple[str, str | None], float] = {}

    def keep(self, tool: str, version: str | None, descriptor: ToolDescriptor) -> None:
        """Remember ``descriptor`` as what a lookup of ``tool`` at ``version`` answered just now."""
        self._seen[(tool, version)] = descriptor
        self._seen_at[(tool, version)] = time.monotonic()

    def fresh(self, tool: str, version: str | None) -> ToolDescriptor | None:
        """The descriptor looked up less than ``max_age_s`` ago, else ``None`` (ask again)."""
        seen = self._seen_at.get((tool, version))
        if seen is None or time.monotonic() - seen >= self.max_age_s:
            return None
        return self._seen[(tool, version)]

    def heard(self, issued: ReceiptIssued) -> None:
        """A receipt refused for its sealing makes every descriptor of its tool stale (asked again next time)."""
        if issued.reason_code in SEALING_REFUSED:
            self._seen_at = {seen: at for seen, at in self._seen_at.items() if seen[0] != issued.tool}

    async def for_sealing(self, tool: str, version: str | None, describe: Describe) -> ToolDescriptor | None:
        """The descriptor to seal a call by: a fresh one, else ``describe``'s, else the last one seen.

        Returns:
            The descriptor, or ``None`` when there is no such tool for this principal (nothing
            is known secret; the policy denies the unknown tool).

        Raises:
            RegistryUnavailable: the lookup was refused, or got no answer
                (:class:`RegistryNoAnswer`) for a tool never seen.
        """
        if (descriptor := self.fresh(tool, version)) is not None:
            return descriptor
        try:
            return await describe(tool, version)
        except UnknownTool:
            return None
        except RegistryNoAnswer:
            if (tool, version) not in self._seen:
                raise
            return self._seen[(tool, version)]  # the last one seen: the request still goes in
