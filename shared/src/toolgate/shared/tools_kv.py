"""Tool descriptors in the JetStream KV bucket :data:`catalog.TOOLS_BUCKET`.

Keys: ``<tool>.<version>`` holds the descriptor JSON (written once with KV ``create``,
never updated: a published version is immutable); ``latest.<tool>`` holds the highest
published version (SemVer 2.0.0 §11 precedence). Readers cache exact versions forever.
"""

from __future__ import annotations

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue

from toolgate.shared import catalog
from toolgate.shared.descriptors import ToolDescriptor, semver_key

__all__ = ["DescriptorConflict", "ToolsBucket"]


class DescriptorConflict(Exception):
    """Different content was published under an existing ``(tool, version)``."""


class ToolsBucket:
    """Reads and writes descriptors; exact versions are cached after the first read."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv
        self._cache: dict[tuple[str, str], ToolDescriptor] = {}

    @classmethod
    async def open(cls, js: JetStreamContext) -> ToolsBucket:
        """Bind to the existing bucket.

        Raises:
            nats.js.errors.BucketNotFoundError: the bucket was not provisioned.
        """
        return cls(await js.key_value(catalog.TOOLS_BUCKET))

    async def publish(self, descriptor: ToolDescriptor) -> bool:
        """Store a new version; return ``False`` if the identical version already exists.

        Raises:
            DescriptorConflict: the version exists with different content.
        """
        data = msgspec.json.encode(descriptor)
        try:
            await self._kv.create(f"{descriptor.name}.{descriptor.version}", data)
        except KeyWrongLastSequenceError:
            existing = await self.get(descriptor.name, descriptor.version)
            if existing != descriptor:
                raise DescriptorConflict(f"{descriptor.name}@{descriptor.version}") from None
            return False
        await self._raise_latest(descriptor)
        return True

    async def _raise_latest(self, descriptor: ToolDescriptor) -> None:
        latest = await self.latest_version(descriptor.name)
        if latest is None or semver_key(descriptor.version) > semver_key(latest):
            await self._kv.put(f"latest.{descriptor.name}", descriptor.version.encode())

    async def latest_version(self, tool: str) -> str | None:
        """Return the highest published version of ``tool``, or ``None``."""
        try:
            entry = await self._kv.get(f"latest.{tool}")
        except KeyNotFoundError:
            return None
        return (entry.value or b"").decode() or None

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        """Return the descriptor of ``tool`` at ``version`` (``None``: latest), or ``None``."""
        version = version or await self.latest_version(tool)
        if version is None:
            return None
        if cached := self._cache.get((tool, version)):
            return cached
        try:
            entry = await self._kv.get(f"{tool}.{version}")
        except KeyNotFoundError:
            return None
        descriptor = msgspec.json.decode(entry.value or b"", type=ToolDescriptor)
        self._cache[(tool, version)] = descriptor
        return descriptor

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name."""
        try:
            keys = await self._kv.keys()  # nats-py's `filters=` is a substring match, not a subject filter
        except NoKeysError:
            return []
        found = [await self.get(key.removeprefix("latest.")) for key in keys if key.startswith("latest.")]
        return sorted((d for d in found if d is not None), key=lambda d: d.name)
