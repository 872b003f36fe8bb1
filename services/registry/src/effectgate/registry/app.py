"""Composition root of the registry service: the only place its settings are read.

The registry owns the bus layout: it provisions both streams, the durable consumers and
the KV buckets (tools, policy, chat cards) at start-up, then publishes the configured descriptors.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faststream import FastStream
from nats.js import JetStreamContext

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.adapters.state_recorder import StateRecorder
from effectgate.registry.domain import parse_descriptor
from effectgate.registry.errors import PublishRefused, RegistryError
from effectgate.registry.handlers import build_router
from effectgate.registry.importing import McpImports
from effectgate.registry.ports import ToolStates
from effectgate.registry.service import Registry
from effectgate.registry.settings import RegistrySettings
from effectgate.shared.config.bus import BusSettings
from effectgate.shared.config.effectgate_file import ToolLimits, apply_limits, load_config, load_servers
from effectgate.shared.config.keyring import check_holds_only_own, load_public_keys
from effectgate.shared.config.settings import deprecated_mcp_env
from effectgate.shared.mcp.servers import McpServerConfig, configured_secrets
from effectgate.shared.mcp.stderr import scrub_with
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.health import monitoring
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.log_scrubbing import install_log_filter
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.provision import ensure_bus
from effectgate.shared.stores.stream import publish_event
from effectgate.shared.stores.tools_kv import ToolsBucket

__all__ = ["create_app"]

log = logging.getLogger("effectgate.registry")


async def _seed(settings: RegistrySettings, imports: McpImports) -> list[ToolDescriptor]:
    """The descriptors to publish at start-up: the descriptor directories', then each MCP server's that is listed."""
    found: list[ToolDescriptor] = []
    for directory in settings.descriptors_dir:
        found += [d for path in sorted(directory.glob("*.json")) if (d := _descriptor_file(path)) is not None]
    return found + await imports.first()


def _descriptor_file(path: Path) -> ToolDescriptor | None:
    """The descriptor in ``path``; ``None`` when it is refused (logged naming the file: the tool is not published)."""
    try:
        return parse_descriptor(path.read_bytes())
    except PublishRefused as refused:
        log.error("not published: %s: %s: %s", path, refused.reason_code, refused.reason)
        return None


def _servers(settings: RegistrySettings) -> list[McpServerConfig]:
    return list(load_servers(settings.mcp_servers_file).values()) if settings.mcp_servers_file else []


def _limited(descriptor: ToolDescriptor, limits: dict[str, ToolLimits]) -> tuple[ToolDescriptor, bool]:
    """``descriptor`` with the operator's limits applied, and whether they changed it."""
    limited = apply_limits(descriptor, limits)
    return limited, limited is not descriptor


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
        OSError / ValueError (at start-up): a descriptor directory or the MCP servers file
            cannot be read or is invalid, or ``<keys_dir>/operator.pub`` is invalid (a
            descriptor file the registry refuses and an MCP server that cannot be listed are
            logged, not raised: those tools are not published).
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
    """
    settings = settings or RegistrySettings()
    if warning := deprecated_mcp_env():
        log.warning("%s", warning)
    check_holds_only_own(settings.keys_dir, "registry")
    operator_key = load_public_keys(settings.keys_dir, ("operator",)).get("operator")
    reporter = SecurityReporter("registry")  # permission violations on its connection
    broker = new_broker("registry", settings, reporter)
    cell: RuntimeCell[Registry] = RuntimeCell()
    states: RuntimeCell[ToolStates] = RuntimeCell()
    broker.include_router(build_router(cell, states))
    servers = _servers(settings)
    imports = McpImports(servers, settings.mcp_timeout_s, import_mcp_server)
    limits = load_config(settings.config_file).tools.limits
    layout = BusSettings(config_file=settings.config_file).layout()

    async def build(js: JetStreamContext) -> None:
        await ensure_bus(js, layout)

        async def announce(subject: str, event: Any) -> object:
            return await publish_event(js, subject, event)

        bucket, clock = await ToolsBucket.open(js), lambda: datetime.now(UTC)
        recorder = StateRecorder(bucket, on_ready=imports.ready)
        states.set(recorder)
        await recorder.catch_up(js)
        names = frozenset(config.name for config in servers)
        registry = Registry(bucket, announce, clock, operator_key=operator_key, reporter=reporter, mcp_servers=names)

        async def publish(descriptor: ToolDescriptor) -> None:
            await _publish(registry, *_limited(descriptor, limits))

        for descriptor in await _seed(settings, imports):
            await publish(descriptor)
        cell.set(registry)
        imports.keep_trying(publish)

    lifecycle = Lifecycle(
        reporter=reporter,
        monitoring=monitoring("registry", settings),
        closers=(imports.aclose,),
        ready_checks={"mcp_imports": imports.still_listing},
    )
    app = new_app(broker, build, lifecycle)
    redactor = Redactor(find_secrets, configured_secrets({config.name: config for config in servers}))
    install_log_filter(redactor)
    scrub_with(redactor.text)
    return app
