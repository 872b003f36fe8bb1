"""Importing the configured MCP servers: once at start-up, then again for each that could not be listed.

A server that cannot be listed at start-up (not installed yet, crashing, unreachable) never
stops the registry: it is logged in one line and tried again in the background, after
:data:`RETRY_FIRST_S` seconds, doubling to at most :data:`RETRY_MAX_S`, until a listing is
published.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

import msgspec

from effectgate.contracts.errors import described
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.registry.errors import PublishRefused, RegistryError
from effectgate.registry.ports import ServerImporter
from effectgate.shared.mcp.servers import McpServerConfig, configured_secrets
from effectgate.shared.secrets.redaction import MIN_KNOWN_CHARS

__all__ = ["RETRY_FIRST_S", "RETRY_MAX_S", "McpImports"]

log = logging.getLogger("effectgate.registry")

RETRY_FIRST_S = 2.0
"""Delay before the first retry of a server that could not be listed, seconds."""

RETRY_MAX_S = 30.0
"""Longest delay between two retries, seconds."""

Publish = Callable[[ToolDescriptor], Awaitable[None]]


class McpImports:
    """The configured MCP servers' descriptors, with retries for those not listed yet.

    Args:
        servers: the configured servers.
        timeout_s: limit for one import (start, handshake, listing), seconds.
        importer: lists one server (the composition root passes the MCP adapter).
    """

    def __init__(self, servers: Iterable[McpServerConfig], timeout_s: float, importer: ServerImporter) -> None:
        self._servers, self._timeout_s, self._importer = list(servers), timeout_s, importer
        configured = configured_secrets({config.name: config for config in self._servers})
        self._secrets = [value for value in configured if len(value) >= MIN_KNOWN_CHARS]  # as the redactor counts
        self._missing: dict[str, McpServerConfig] = {}
        self._listing: set[str] = set()
        self._refused: set[str] = set()
        self._wake: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def first(self) -> list[ToolDescriptor]:
        """Import every server once, all at once (so start-up waits one ``timeout_s`` at most, not one per server).

        Returns the descriptors in configuration order; remembers the servers that could not be listed.
        """
        self._listing = {config.name for config in self._servers}
        imported = await asyncio.gather(*(self._first_of(config) for config in self._servers))
        for config, descriptor in zip(self._servers, imported, strict=True):
            if descriptor is None and config.name not in self._refused:
                self._missing[config.name] = config
        return [descriptor for descriptor in imported if descriptor is not None]

    async def _first_of(self, config: McpServerConfig) -> ToolDescriptor | None:
        try:
            return await self._import(config, retrying=False)
        finally:
            self._listing.discard(config.name)

    @property
    def listing(self) -> list[str]:
        """Names of the servers whose first listing is still under way (start-up waits for them)."""
        return sorted(self._listing)

    def still_listing(self) -> str | None:
        """A readiness check: ``listing MCP servers: git, notes`` while the first listings run, else ``None``."""
        return f"listing MCP servers: {', '.join(self.listing)}" if self._listing else None

    @property
    def missing(self) -> list[str]:
        """Names of the servers not listed yet (and not refused), to be tried again."""
        return sorted(self._missing)

    def keep_trying(self, publish: Publish) -> None:
        """Retry each server not listed yet in the background, publishing its descriptor once listed."""
        for config in self._missing.values():
            self._wake[config.name] = asyncio.Event()
            task = asyncio.create_task(self._retry(config, publish), name=f"import-{config.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def ready(self, tool: str) -> None:
        """The executor announced ``tool`` ready: retry its server now, if it is still missing."""
        wake = self._wake.get(tool.removeprefix("mcp_"))
        if wake is not None and tool.startswith("mcp_"):
            wake.set()

    async def aclose(self) -> None:
        """Stop retrying."""
        for task in set(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _retry(self, config: McpServerConfig, publish: Publish) -> None:
        delay_s, wake = RETRY_FIRST_S, self._wake[config.name]
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay_s)
            wake.clear()
            descriptor = await self._import(config, retrying=True)
            if descriptor is not None:
                log.info("MCP server %r imported on a retry", config.name)
                await publish(descriptor)
            if descriptor is not None or config.name in self._refused:
                self._missing.pop(config.name, None)
                return
            delay_s = min(delay_s * 2, RETRY_MAX_S)

    def _without_secrets(self, config: McpServerConfig, descriptor: ToolDescriptor) -> ToolDescriptor:
        """``descriptor``, unless the server's listing carries a configured secret value.

        Raises:
            PublishRefused: ``secret_in_listing``: a descriptor is published to every service,
                agent and log; a listing that quotes a secret is never published (the value is not named).
        """
        if _leaks(descriptor, self._secrets):
            reason = f"MCP server {config.name!r} lists a configured secret value (its version, a tool name, a "
            raise PublishRefused("secret_in_listing", reason + "description or a schema): not published")
        return descriptor

    async def _import(self, config: McpServerConfig, retrying: bool) -> ToolDescriptor | None:
        """The server's descriptor, or ``None`` (logged: once when first missing, at DEBUG on retries)."""
        try:
            return self._without_secrets(config, await self._importer(config, self._timeout_s))
        except (RegistryError, ValueError) as error:  # the listing or the configuration, not the moment
            self._refused.add(config.name)
            log.error(
                "MCP server %r not imported: its changes are not published and the version published before "
                "(if any) stays in force: %s",
                config.name,
                error,
            )
        except Exception as error:  # a crash, a hang, a refused connection: named, never a traceback
            level = logging.DEBUG if retrying else logging.ERROR
            log.log(
                level,
                "MCP server %r not imported, it could not be listed (retried in the background): %s",
                config.name,
                summary(error),
            )
        return None


def _leaks(descriptor: ToolDescriptor, secrets: list[str]) -> bool:
    """Whether any configured secret value appears in the descriptor (version, names, descriptions, schemas)."""
    text = msgspec.json.encode(descriptor).decode()
    return any(value in text or msgspec.json.encode(value).decode()[1:-1] in text for value in secrets)


def summary(error: BaseException) -> str:
    """``Type: text`` of the first leaf of ``error`` (task groups wrap it), then its notes; 600 characters at most.

    The text is never empty (:func:`~effectgate.contracts.errors.described`: ``TimeoutError: timed out``).
    """
    notes = list(getattr(error, "__notes__", ()))
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
        notes += getattr(error, "__notes__", ())
    return (f"{type(error).__name__}: {described(error)[:300]}" + "".join(f"; {note}" for note in notes))[:600]
