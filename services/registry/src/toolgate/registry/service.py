"""The registry workflow: publish (immutable versions), get, list."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from toolgate.registry.domain import RegistryReply, validate_descriptor
from toolgate.registry.errors import PublishRefused
from toolgate.shared.catalog import Subjects
from toolgate.shared.descriptors import ToolDescriptor, descriptor_digest
from toolgate.shared.events import ToolPublished
from toolgate.shared.tools_kv import DescriptorConflict, ToolsBucket

__all__ = ["Registry"]


@dataclass
class Registry:
    """Publishes descriptors to the bucket and announces them on the stream."""

    bucket: ToolsBucket
    publish_event: Callable[[str, Any], Awaitable[object]]
    clock: Callable[[], datetime]

    async def publish(self, descriptor: ToolDescriptor) -> RegistryReply:
        """Publish ``descriptor``; identical re-publication is accepted, other content refused.

        Raises:
            PublishRefused: invalid descriptor or ``version_immutable``.
        """
        validate_descriptor(descriptor)
        digest = descriptor_digest(descriptor)
        try:
            created = await self.bucket.publish(descriptor)
        except DescriptorConflict:
            raise PublishRefused(
                "version_immutable", f"{descriptor.name}@{descriptor.version} exists with other content"
            ) from None
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

    async def get(self, tool: str, version: str | None) -> RegistryReply:
        """Look up one descriptor (exact version, or the latest)."""
        found = await self.bucket.get(tool, version)
        if found is None:
            return RegistryReply(ok=False, reason_code="unknown_tool", reason=f"no {tool}@{version or 'latest'}")
        return RegistryReply(
            ok=True, reason_code="found", reason="found", descriptor=found, digest=descriptor_digest(found)
        )

    async def list(self) -> RegistryReply:
        """The latest version of every tool."""
        found = await self.bucket.list()
        return RegistryReply(ok=True, reason_code="found", reason=f"{len(found)} tools", descriptors=found)
