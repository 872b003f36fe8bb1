"""Each principal's MCP tools: what the policy service lists for it, named and shaped for MCP.

The listing is asked of the policy service as the principal itself
(``tg.tools.list.<principal>``, :meth:`effectgate.sdk.ToolClient.list_tools`): only the tools,
and of each only the operations, the current policy lets it call. It is kept per principal
and asked again when the registry or the policy changes (:meth:`Listings.refresh`).
"""

from __future__ import annotations

import hashlib
import json

from mcp_types import Tool

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.surface.naming import name_all
from effectgate.surface.ports import AgentClients
from effectgate.surface.shaping import Target, mcp_tool, target_of

__all__ = ["Listing", "Listings"]


class Listing:
    """One principal's tools: ``targets`` by MCP name, the MCP tools, and a digest of both."""

    def __init__(self, descriptors: list[ToolDescriptor], flat: frozenset[str]) -> None:
        by_name = {d.name: d for d in descriptors}
        pairs = [(d.name, operation) for d in descriptors for operation in sorted(d.operations)]
        self.targets: dict[str, Target] = {
            name: target_of(by_name[tool], operation) for name, (tool, operation) in name_all(pairs, flat).items()
        }
        self.tools: list[Tool] = [
            mcp_tool(name, target, by_name[target.tool].description) for name, target in self.targets.items()
        ]
        dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in self.tools]
        self.digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


class Listings:
    """Listings kept per principal.

    Args:
        agents: the principals' connections.
        flat: tools whose operations keep their own names (:mod:`effectgate.surface.naming`).
    """

    def __init__(self, agents: AgentClients, flat: frozenset[str]) -> None:
        self._agents, self._flat = agents, flat
        self._kept: dict[str, Listing] = {}

    async def of(self, principal: str) -> Listing:
        """``principal``'s listing (asked once, then kept until :meth:`refresh`).

        Raises:
            effectgate.surface.errors.NotServed: no credentials for the principal.
            effectgate.sdk.RegistryUnavailable: the policy service did not answer.
        """
        if principal not in self._kept:
            self._kept[principal] = await self._ask(principal)
        return self._kept[principal]

    async def _ask(self, principal: str) -> Listing:
        client = await self._agents.client(principal)
        return Listing(await client.list_tools(), self._flat)

    async def refresh(self) -> list[str]:
        """Ask again for every kept listing; return the principals whose listing changed.

        A listing that cannot be asked now is dropped (asked again on next use) and counted as changed.
        """
        changed = []
        for principal, old in list(self._kept.items()):
            try:
                new = await self._ask(principal)
            except Exception:  # the policy service may be restarting: drop, re-ask on next use
                self._kept.pop(principal, None)
                changed.append(principal)
                continue
            self._kept[principal] = new
            if new.digest != old.digest:
                changed.append(principal)
        return changed
