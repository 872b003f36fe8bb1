"""The registry workflow: publish (immutable versions), publish MCP listings (changed: a new version), get, list."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import ToolPublished
from effectgate.contracts.rpc.registry import RegistryReply
from effectgate.contracts.security import SecurityKind
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.registry.domain import (
    check_lookup,
    check_size,
    parse_publish_request,
    validate_descriptor,
)
from effectgate.registry.errors import PublishRefused
from effectgate.registry.revisions import descriptor_changes, listing_version, next_patch, same_content
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.tools_kv import DescriptorConflict, LatestContended, ToolsBucket

__all__ = ["VERSION_PROBES", "Registry"]

log = logging.getLogger("effectgate.registry")

VERSION_PROBES = 100
"""Patch versions tried in a row for a changed MCP listing before giving up."""


@dataclass
class Registry:
    """Publishes descriptors to the bucket and announces them on the stream.

    ``operator_key`` verifies descriptors published over the bus (``None``: none may be);
    ``mcp_servers`` are the configured MCP servers an ``mcp:<server>`` adapter must name
    (``None``: any well-formed name).
    """

    bucket: ToolsBucket
    publish_event: Callable[[str, Any], Awaitable[object]]
    clock: Callable[[], datetime]
    operator_key: Ed25519PublicKey | None = None
    reporter: SecurityReporter | None = None
    mcp_servers: frozenset[str] | None = None

    async def publish_request(self, data: bytes) -> RegistryReply:
        """Answer one ``tg.registry.publish``: an operator-signed descriptor is published.

        A request the operator key did not sign is refused ``not_operator`` and reported as a
        ``publish_refused`` security event (the body recorded as its SHA-256 only).

        Raises:
            PublishRefused: as :func:`~effectgate.registry.domain.parse_publish_request` and :meth:`publish`.
        """
        try:
            descriptor = parse_publish_request(data, self.operator_key)
        except PublishRefused as refused:
            if refused.reason_code == "not_operator" and self.reporter is not None:
                self.reporter.report(
                    SecurityKind.PUBLISH_REFUSED,
                    subject=Rpc.REGISTRY_PUBLISH,
                    reason_code=refused.reason_code,
                    detail=refused.reason,
                    payload=data,
                )
            raise
        return await self.publish(descriptor)

    async def publish(self, descriptor: ToolDescriptor) -> RegistryReply:
        """Publish ``descriptor``; identical re-publication is accepted, other content refused.

        Raises:
            PublishRefused: ``descriptor_too_large`` (larger than the bus carries, see
                :attr:`ToolsBucket.max_descriptor_bytes`; nothing is written), invalid descriptor,
                ``version_immutable``, or ``latest_contended`` (the version is stored but
                ``latest`` could not be raised yet).
        """
        check_size(descriptor, self.bucket.max_descriptor_bytes)
        validate_descriptor(descriptor, self.mcp_servers)
        digest = descriptor_digest(descriptor)
        try:
            created = await self.bucket.publish(descriptor)
        except DescriptorConflict:
            raise PublishRefused(
                "version_immutable",
                f"{descriptor.name}@{descriptor.version} exists with other content: versions are immutable, "
                "publish the change under a new version",
            ) from None
        except LatestContended as error:
            raise PublishRefused("latest_contended", f"{error}; publish the same descriptor again") from None
        if created:
            event = ToolPublished(
                event_id=f"published:{descriptor.name}:{descriptor.version}:{uuid.uuid4().hex[:8]}",
                occurred_at=self.clock(),
                tool=descriptor.name,
                version=descriptor.version,
                digest=digest,
            )
            await self.publish_event(Subjects.tool_published(descriptor.name), event)
        state = "published" if created else "unchanged"
        return RegistryReply(
            ok=True,
            reason_code=state,
            reason=f"{descriptor.name}@{descriptor.version} {state}",
            descriptor=descriptor,
            digest=digest,
        )

    async def publish_listing(self, descriptor: ToolDescriptor) -> RegistryReply:
        """Publish an imported MCP listing; a changed listing becomes a new version.

        Same content as the latest stored version: ``unchanged``. Otherwise the version of
        :func:`~effectgate.registry.revisions.listing_version` (the first one free), logged at
        WARNING with what changed.

        Raises:
            PublishRefused: as :meth:`publish`; ``no_free_version`` when
                :data:`VERSION_PROBES` patch versions in a row hold other content.
        """
        check_size(descriptor, self.bucket.max_descriptor_bytes)  # before any version is chosen or logged
        latest = await self.bucket.get(descriptor.name)
        if latest is not None and same_content(latest, descriptor):
            return await self.publish(latest)
        highest = latest.version if latest is not None else None
        version = await self._free_version(descriptor, listing_version(descriptor.version, highest))
        if latest is not None:
            changes = "; ".join(descriptor_changes(latest, descriptor))
            log.warning("%s changed since %s (%s): published as %s", descriptor.name, highest, changes, version)
        return await self.publish(msgspec.structs.replace(descriptor, version=version))

    async def _free_version(self, descriptor: ToolDescriptor, version: str) -> str:
        for _ in range(VERSION_PROBES):
            stored = await self.bucket.get(descriptor.name, version)
            if stored is None or same_content(stored, descriptor):
                return version
            version = next_patch(version)
        raise PublishRefused("no_free_version", f"{descriptor.name}: no free version up to {version}")

    async def get(self, tool: str, version: str | None) -> RegistryReply:
        """Look up one descriptor (exact version, or the latest); a missing one answers ``unknown_tool``.

        Raises:
            LookupRefused: ``invalid_tool`` / ``invalid_version`` (see :func:`check_lookup`).
        """
        check_lookup(tool, version)
        found = await self.bucket.get(tool, version)
        if found is None:
            return RegistryReply(ok=False, reason_code="unknown_tool", reason=f"no {tool}@{version or 'latest'}")
        return RegistryReply(
            ok=True, reason_code="found", reason="found", descriptor=found, digest=descriptor_digest(found)
        )

    async def list(self) -> RegistryReply:
        """The latest version of every tool, and every recorded tool state (a tool never listed may have one)."""
        found = await self.bucket.list()
        states = await self.bucket.states(await self.bucket.state_names())
        return RegistryReply(
            ok=True, reason_code="found", reason=f"{len(found)} tools", descriptors=found, states=states or None
        )
