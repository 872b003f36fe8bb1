"""One SDK connection per principal: the surface acts for each principal as that principal's own NATS user.

On a secured bus each principal ``<p>`` connects with its credentials file ``<credentials
dir>/agent-<p>.json``: NATS permissions, not the surface's code, keep one principal's requests,
receipts and listings away from another's. A principal without a credentials file is not served
(fail closed).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.bus.nats_credentials import credentials_file
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.sdk import ToolClient
from effectgate.surface.errors import NotServed

__all__ = ["Agents"]


class Agents:
    """Connected :class:`ToolClient` per principal, made on first use and kept (replaced once closed for good).

    Args:
        nats_url: the bus.
        credentials_dir: the stack's credentials directory; ``None`` on an open bus.
        public_keys: the gateway's public keys directory (receipts are verified with it).
        options: more ``nats.connect`` options (TLS).
    """

    def __init__(self, nats_url: str, credentials_dir: Path | None, public_keys: Path | None, **options: Any) -> None:
        self._url, self._dir, self._keys, self._options = nats_url, credentials_dir, public_keys, options
        self._clients: dict[str, ToolClient] = {}
        self._lock = asyncio.Lock()

    def served(self, principal: str) -> bool:
        """Whether calls of ``principal`` can be sent (a token name, with credentials on a secured bus)."""
        if not TOKEN.match(principal):
            return False
        return self._dir is None or credentials_file(self._dir, agent_user(principal)).is_file()

    def check(self, principal: str) -> None:
        """Refuse, at start, a principal this surface cannot serve.

        Raises:
            NotServed: naming the credentials file it needs.
        """
        if not self.served(principal):
            where = credentials_file(self._dir, agent_user(principal)) if self._dir else "an open bus"
            raise NotServed(f"principal {principal!r} cannot be served: no {where} (is it under [principals]?)")

    async def client(self, principal: str) -> ToolClient:
        """The connected client of ``principal``.

        Raises:
            NotServed: see :meth:`served`.
            effectgate.sdk.BusUnreachable / PermissionError: the connection failed.
        """
        if principal in self._clients and not self._clients[principal].is_closed:
            return self._clients[principal]
        if not self.served(principal):
            raise NotServed(f"principal {principal!r} has no credentials on this surface")
        async with self._lock:
            if principal not in self._clients or self._clients[principal].is_closed:
                self._clients[principal] = await self._connect(principal)  # a closed one is replaced
        return self._clients[principal]

    async def _connect(self, principal: str) -> ToolClient:
        credentials = credentials_file(self._dir, agent_user(principal)) if self._dir else None
        return await ToolClient.connect(
            self._url, principal, credentials=credentials, public_keys=self._keys, **self._options
        )

    def principals(self) -> list[str]:
        """The principals connected so far."""
        return list(self._clients)

    async def aclose(self) -> None:
        """Close every connection."""
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
