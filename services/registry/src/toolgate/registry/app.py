"""Composition root of the registry service: the only place its settings are read.

The registry owns the bus layout: it provisions both streams, the durable consumers and
the KV buckets (tools, policy, chat cards) at start-up, then publishes the configured descriptors.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.registry.adapters.mcp_import import import_mcp_server
from toolgate.registry.adapters.state_recorder import StateRecorder
from toolgate.registry.domain import parse_descriptor
from toolgate.registry.errors import RegistryError
from toolgate.registry.handlers import build_router
from toolgate.registry.service import Registry
from toolgate.registry.settings import RegistrySettings
from toolgate.shared.bus import publish_event
from toolgate.shared.config import ToolLimits, apply_limits, load_config, load_servers
from toolgate.shared.health import monitoring
from toolgate.shared.keyring import check_holds_only_own, load_public_keys
from toolgate.shared.mcp_config import McpServerConfig
from toolgate.shared.provision import ensure_bus
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker
from toolgate.shared.settings import deprecated_mcp_env
from toolgate.shared.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("toolgate.registry")


async def _seed(settings: RegistrySettings) -> list[tuple[ToolDescriptor, bool]]:
    """The descriptors to publish at start-up, each with whether the operator's limits changed it."""
    found: list[ToolDescriptor] = []
    for directory in settings.descriptors_dir:
        found += [parse_descriptor(path.read_bytes()) for path in sorted(directory.glob("*.json"))]
    if settings.mcp_servers_file is not None:
        for config in load_servers(settings.mcp_servers_file).values():
            found.extend(await _import(config, settings.mcp_timeout_s))
    limits = load_config(settings.config_file).tools.limits
    return [_limited(descriptor, limits) for descriptor in found]


def _limited(descriptor: ToolDescriptor, limits: dict[str, ToolLimits]) -> tuple[ToolDescriptor, bool]:
    limited = apply_limits(descriptor, limits)
    return limited, limited is not descriptor


async def _import(config: McpServerConfig, timeout_s: float) -> list[ToolDescriptor]:
    """The server's descriptor, or none (one line logged) when its listing is refused or it cannot be reached.

    A server that cannot start never stops the registry: the version published before (if
    any) stays, and the executor reports the server ``unavailable``.
    """
    try:
        return [await import_mcp_server(config, timeout_s)]
    except RegistryError as error:
        log.error(
            "MCP server %r not imported: its changes are not published and the version published before "
            "(if any) stays in force: %s",
            config.name,
            error,
        )
    except Exception as error:  # a crash, a hang, a refused connection: named, never a traceback
        log.error("MCP server %r not imported, it could not be listed: %s", config.name, _summary(error))
    return []


def _summary(error: BaseException) -> str:
    """The first leaf of ``error`` (task groups wrap it), as ``Type: text``, clipped to 300 characters."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"[:300]


async def _publish(registry: Registry, descriptor: ToolDescriptor, limited: bool = False) -> None:
    """Publish one descriptor; a changed one follows to a new version when it is an MCP listing or limited.

    An MCP server's descriptor (adapter ``mcp:<server>``) and one the operator's limits changed
    (``limited``) are published with :meth:`Registry.publish_listing`; others as they are.
    """
    follows = limited or descriptor.adapter.startswith("mcp:")
    publish = registry.publish_listing if follows else registry.publish
    try:
        log.info("%s", (await publish(descriptor)).reason)
    except RegistryError as error:
        log.error("not published: %s", error)


def create_app(settings: RegistrySettings | None = None) -> FastStream:
    """Build the registry service.

    Raises:
        RegistryError / OSError / ValueError (at start-up): a configured descriptor or the
            MCP servers file is invalid, or ``<keys_dir>/operator.pub`` is invalid (an MCP
            server that cannot be listed is logged, not raised).
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
    """
    settings = settings or RegistrySettings()
    if warning := deprecated_mcp_env():
        log.warning("%s", warning)
    check_holds_only_own(settings.keys_dir, "registry")
    operator_key = load_public_keys(settings.keys_dir, ("operator",)).get("operator")
    reporter = SecurityReporter("registry")  # permission violations on its connection
    broker = new_broker("registry", settings, reporter)
    cell: RuntimeCell[Registry] = RuntimeCell()
    states: RuntimeCell[StateRecorder] = RuntimeCell()
    broker.include_router(build_router(cell, states))

    async def build(js: JetStreamContext) -> None:
        await ensure_bus(js)

        async def announce(subject: str, event: Any) -> object:
            return await publish_event(js, subject, event)

        bucket, clock = await ToolsBucket.open(js), lambda: datetime.now(UTC)
        recorder = StateRecorder(bucket)
        states.set(recorder)
        await recorder.catch_up(js)
        registry = Registry(bucket, announce, clock, operator_key=operator_key, reporter=reporter)
        for descriptor, limited in await _seed(settings):
            await _publish(registry, descriptor, limited)
        cell.set(registry)

    return new_app(broker, build, Lifecycle(reporter=reporter, monitoring=monitoring("registry", settings)))
