"""Tool descriptors in the JetStream KV bucket :data:`catalog.TOOLS_BUCKET`."""

from __future__ import annotations

import time
from functools import partial

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from effectgate.contracts.bus import catalog
from effectgate.contracts.errors import Problem
from effectgate.contracts.tools.descriptors import SEMVER, ToolDescriptor, semver_key
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.shared.stores.binding import bound

__all__ = ["REPLY_MARGIN_BYTES", "DescriptorConflict", "LatestContended", "ToolsBucket"]

CAS_ATTEMPTS = 20
"""Compare-and-swap attempts to raise ``latest.<tool>`` before giving up."""

LATEST_MAX_AGE_S = 5.0
"""Seconds a followed ``latest.<tool>`` is trusted without a put confirming it (:meth:`ToolsBucket.follow_latest`)."""

REPLY_MARGIN_BYTES = 4096
"""Room kept under the bus's payload limit for what travels with a descriptor, bytes.

A stored descriptor is sent whole: KV headers when it is written, the envelope of a
``tg.registry.get`` answer (``ok``, reason, digest) when it is read.
"""


class DescriptorConflict(Problem):
    """Different content was published under an existing ``(tool, version)``."""


class LatestContended(Problem):
    """``latest.<tool>`` kept changing under :data:`CAS_ATTEMPTS` compare-and-swap attempts."""


class ToolsBucket:
    """Reads and writes descriptors; exact versions are cached after the first read.

    Args:
        kv: the bound bucket.
        js: the JetStream context it was bound with (stream info for listing).
        bucket: the bucket's name.
    """

    def __init__(self, kv: KeyValue, js: JetStreamContext, bucket: str = catalog.TOOLS_BUCKET) -> None:
        self._kv, self._js = kv, js
        self._stream, self._latest_prefix = f"KV_{bucket}", f"$KV.{bucket}.latest."
        self._cache: dict[tuple[str, str], ToolDescriptor] = {}
        self._latest_seen: dict[str, tuple[str | None, float]] = {}
        self._following = False
        self._listed: tuple[tuple[int, int], list[ToolDescriptor]] | None = None

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = catalog.TOOLS_BUCKET) -> ToolsBucket:
        """Bind to the existing bucket (``bucket`` other than the catalog's: tests only).

        A bucket not provisioned yet is waited for (:func:`~effectgate.shared.stores.binding.bound`).
        """
        return cls(await bound(f"bucket {bucket}", partial(js.key_value, bucket)), js, bucket)

    @property
    def max_payload(self) -> int:
        """The connection's payload limit (the server's NATS ``max_payload``), bytes."""
        return int(self._js._nc.max_payload)

    @property
    def max_descriptor_bytes(self) -> int:
        """Largest descriptor (its JSON) the bucket can store and hand out: :attr:`max_payload` less the margin, bytes.

        See :data:`REPLY_MARGIN_BYTES`. A larger one would fail to be written (``MaxPayloadError``).
        """
        return self.max_payload - REPLY_MARGIN_BYTES

    async def publish(self, descriptor: ToolDescriptor) -> bool:
        """Store a new version; return ``False`` if the identical version already exists.

        Either way ``latest.<tool>`` is raised to this version if it is higher.

        Raises:
            DescriptorConflict: the version exists with different content.
            LatestContended: ``latest`` could not be raised (see :data:`CAS_ATTEMPTS`).
        """
        data = msgspec.json.encode(descriptor)
        created = True
        try:
            await self._kv.create(f"{descriptor.name}.{descriptor.version}", data)
        except KeyWrongLastSequenceError:
            existing = await self.get(descriptor.name, descriptor.version)
            if existing != descriptor:
                raise DescriptorConflict(f"{descriptor.name}@{descriptor.version}") from None
            created = False
        await self._raise_latest(descriptor.name, descriptor.version)
        return created

    async def _raise_latest(self, tool: str, version: str) -> None:
        """Compare-and-swap ``latest.<tool>`` up to ``version``; never lowers it (a non-version is replaced)."""
        key = f"latest.{tool}"
        for _ in range(CAS_ATTEMPTS):
            current, revision = await self._latest(tool)
            if current is not None and SEMVER.match(current) and semver_key(current) >= semver_key(version):
                return
            try:
                if revision is None:
                    await self._kv.create(key, version.encode())
                else:
                    await self._kv.update(key, version.encode(), last=revision)
                return
            except KeyWrongLastSequenceError:
                continue  # another writer moved it: read again
        raise LatestContended(f"latest.{tool} kept changing during {CAS_ATTEMPTS} attempts")

    async def _latest(self, tool: str) -> tuple[str | None, int | None]:
        """``(version, revision)`` of ``latest.<tool>``; ``(None, None)`` when absent or deleted."""
        try:
            entry = await self._kv.get(f"latest.{tool}")
        except KeyNotFoundError:
            return None, None
        return (entry.value or b"").decode() or None, entry.revision

    async def latest_version(self, tool: str) -> str | None:
        """Return the highest published version of ``tool``, or ``None``.

        After :meth:`follow_latest`, from memory while younger than :data:`LATEST_MAX_AGE_S`.
        """
        if self._following and (seen := self._latest_seen.get(tool)) and time.monotonic() - seen[1] < LATEST_MAX_AGE_S:
            return seen[0]
        version = (await self._latest(tool))[0]
        if self._following:
            self._latest_seen[tool] = (version, time.monotonic())
        return version

    async def follow_latest(self, nc: Client) -> None:
        """Keep each ``latest.<tool>`` read in memory, updated by its puts as they happen.

        A KV put is also a core NATS message on ``$KV.<bucket>.latest.<tool>``: this process
        hears every raise within one hop and reads the bucket no more than once every
        :data:`LATEST_MAX_AGE_S` per tool (which also bounds how long a raise missed while
        disconnected stays unseen). A stale ``latest`` only makes a call decide on the version
        before; the decision names the exact version, and the executor runs exactly that one.
        """
        await nc.subscribe(f"{self._latest_prefix}*", cb=self._heard_latest)
        self._following = True

    async def _heard_latest(self, msg: Msg) -> None:
        tool = msg.subject.removeprefix(self._latest_prefix)
        if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
            self._latest_seen.pop(tool, None)
            return
        version = msg.data.decode(errors="replace") or None
        self._latest_seen[tool] = (version if version and SEMVER.match(version) else None, time.monotonic())

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

    async def state(self, tool: str) -> ToolState | None:
        """The tool's recorded state, or ``None`` when none was recorded (a tool with no server).

        Raises:
            nats.errors.TimeoutError, nats.js.errors.APIError: the bucket could not be read.
            msgspec.ValidationError: the stored value is not a state.
        """
        try:
            entry = await self._kv.get(f"state.{tool}")
        except KeyNotFoundError:
            return None
        return msgspec.json.decode(entry.value or b"", type=ToolState) if entry.value else None

    async def put_state(self, tool: str, state: ToolState) -> None:
        """Record ``state`` as the tool's latest (the registry only)."""
        await self._kv.put(f"state.{tool}", msgspec.json.encode(state))

    async def states(self, tools: list[str]) -> dict[str, ToolState]:
        """The recorded state of each of ``tools`` that has one."""
        found = {tool: await self.state(tool) for tool in tools}
        return {tool: state for tool, state in found.items() if state is not None}

    async def state_names(self) -> list[str]:
        """Names of the tools that have a recorded state, sorted (registered or not: a server never listed has one)."""
        prefix = self._latest_prefix.replace(".latest.", ".state.")
        info = await self._js.stream_info(self._stream, subjects_filter=f"{prefix}>")
        return sorted(subject.removeprefix(prefix) for subject in info.state.subjects or {})

    async def tool_names(self) -> list[str]:
        """Names of the tools that have a ``latest`` key, sorted (one stream-info request).

        A deleted ``latest`` key still has its delete marker on the subject: such a name
        is listed here and dropped by :meth:`list` (its ``get`` finds nothing). The server
        answers at most 100,000 subjects at once (``JSMaxSubjectDetails``), the bound on
        the number of tools.
        """
        info = await self._js.stream_info(self._stream, subjects_filter=f"{self._latest_prefix}>")
        subjects = info.state.subjects or {}
        return sorted(subject.removeprefix(self._latest_prefix) for subject in subjects)

    async def list(self) -> list[ToolDescriptor]:
        """Return the latest version of every tool, sorted by name; no server-side state is made.

        The bucket's stream reports its last sequence and message count with the names (one
        stream-info request): while both are what they were at the previous listing, nothing
        in the bucket changed and that listing is returned again. Otherwise every ``latest``
        is read from the bucket (never from :meth:`follow_latest`'s memory, so a listing
        kept this way is exact) — a cost that grows with the registry, paid once per change.

        Raises:
            nats.errors.TimeoutError, nats.js.errors.APIError: the stream could not be asked.
        """
        info = await self._js.stream_info(self._stream, subjects_filter=f"{self._latest_prefix}>")
        mark = (info.state.last_seq, info.state.messages)
        if self._listed is not None and self._listed[0] == mark:
            return list(self._listed[1])
        names = sorted(subject.removeprefix(self._latest_prefix) for subject in info.state.subjects or {})
        found = [await self._read_latest(name) for name in names]
        self._listed = (mark, [d for d in found if d is not None])
        return list(self._listed[1])

    async def _read_latest(self, tool: str) -> ToolDescriptor | None:
        """The descriptor ``latest.<tool>`` names, read from the bucket now; ``None`` when there is none."""
        version = (await self._latest(tool))[0]
        return None if version is None else await self.get(tool, version)
