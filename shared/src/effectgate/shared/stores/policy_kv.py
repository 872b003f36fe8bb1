"""The policy in force, and every policy text ever published, in the KV bucket :data:`catalog.POLICY_BUCKET`."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from functools import partial

import msgspec
from nats.js import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from effectgate.contracts.bus import catalog
from effectgate.contracts.errors import Problem
from effectgate.shared.stores.binding import bound

__all__ = [
    "CURRENT",
    "FILE",
    "VERSION",
    "CurrentEntry",
    "PolicyBucket",
    "PolicyConflict",
    "PublishedPolicy",
    "policy_digest",
]

CURRENT = "current"
FILE = "file"
VERSION = re.compile(r"^sha256:([0-9a-f]{64})\Z")
"""A policy version: ``sha256:`` and the 64 lower-case hex digits of the text's SHA-256."""


def policy_digest(text: str) -> str:
    """The version of a policy text: ``sha256:<hex>`` of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class PublishedPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """One published policy.

    Attributes:
        version: ``sha256:<hex>`` of ``text`` (:func:`policy_digest`).
        text: the Cedar policy text.
        published_at: when it was put in force, UTC.
        source: ``cli`` (``effectgate policy publish``) or ``file`` (seeded from a replica's policy file).
    """

    version: str
    text: str
    published_at: datetime
    source: str


@dataclass(frozen=True, slots=True)
class CurrentEntry:
    """What ``current`` holds.

    Attributes:
        policy: the policy in force; ``None`` when there is none or it cannot be believed.
        revision: the entry's KV revision (for compare-and-swap); ``None`` when absent.
        problem: why an existing entry is not believed (not a policy, text not matching its version).
    """

    policy: PublishedPolicy | None
    revision: int | None
    problem: str | None = None


class PolicyConflict(Problem):
    """``current`` changed after it was read: another publication came first."""


_published = msgspec.json.Decoder(PublishedPolicy)


def _believed(data: bytes) -> tuple[PublishedPolicy | None, str | None]:
    """The policy in an entry's value, or why it is not one."""
    try:
        policy = _published.decode(data)
    except msgspec.DecodeError as error:
        return None, f"not a published policy: {error}"
    if policy.version != policy_digest(policy.text):
        return None, f"its text does not hash to its version {policy.version!r}"
    return policy, None


class PolicyBucket:
    """Reads and writes :data:`catalog.POLICY_BUCKET` (see the module docstring for the keys).

    Args:
        kv: the bound bucket.
    """

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = catalog.POLICY_BUCKET) -> PolicyBucket:
        """Bind to the provisioned bucket (``bucket`` other than the catalog's: tests only).

        A bucket not provisioned yet is waited for (:func:`~effectgate.shared.stores.binding.bound`).
        """
        return cls(await bound(f"bucket {bucket}", partial(js.key_value, bucket)))

    async def current(self) -> CurrentEntry:
        """The entry of ``current`` (an absent or deleted key: no policy, no revision).

        Raises:
            nats.errors.Error: the bucket could not be read.
        """
        try:
            entry = await self._kv.get(CURRENT)
        except KeyNotFoundError:
            return CurrentEntry(None, None)
        policy, problem = _believed(entry.value or b"")
        return CurrentEntry(policy, entry.revision, problem)

    async def version(self, version: str) -> PublishedPolicy | None:
        """The published policy of ``version`` (``sha256:<hex>``), or ``None`` when unknown or not believed.

        Raises:
            ValueError: ``version`` is not ``sha256:<64 hex>``.
        """
        found = VERSION.match(version)
        if found is None:
            raise ValueError(f"{version!r} is not a policy version (sha256:<64 hex digits>)")
        try:
            entry = await self._kv.get(f"v.{found[1]}")
        except KeyNotFoundError:
            return None
        policy, _ = _believed(entry.value or b"")
        return policy if policy is not None and policy.version == version else None

    async def file_version(self) -> str | None:
        """The version of the policy file last seeded, or ``None``."""
        try:
            entry = await self._kv.get(FILE)
        except KeyNotFoundError:
            return None
        return (entry.value or b"").decode("utf-8", errors="replace") or None

    async def replace_current(self, policy: PublishedPolicy, revision: int | None) -> int:
        """Put ``policy`` in force if ``current`` is still at ``revision`` (``None``: absent); return the new revision.

        The text is kept under ``v.<hex>`` first, so every version ``current`` ever names can be read.

        Raises:
            PolicyConflict: ``current`` moved since it was read.
        """
        await self.keep(policy)
        data = msgspec.json.encode(policy)
        try:
            if revision is None:
                return int(await self._kv.create(CURRENT, data))
            return int(await self._kv.update(CURRENT, data, last=revision))
        except KeyWrongLastSequenceError:
            raise PolicyConflict(f"{CURRENT} changed after revision {revision}") from None

    async def keep(self, policy: PublishedPolicy) -> None:
        """Store ``policy`` under ``v.<hex>`` unless that version is already kept (versions never change).

        An entry there that is not believed (not this text) is replaced.

        Raises:
            ValueError: ``policy.version`` is not the version of its text.
        """
        found = VERSION.match(policy.version)
        if found is None or policy.version != policy_digest(policy.text):
            raise ValueError(f"{policy.version!r} is not the version of its text")
        key, data = f"v.{found[1]}", msgspec.json.encode(policy)
        try:
            await self._kv.create(key, data)
        except KeyWrongLastSequenceError:
            entry = await self._kv.get(key)
            if _believed(entry.value or b"")[0] is None:
                await self._kv.update(key, data, last=entry.revision)

    async def mark_file(self, version: str) -> None:
        """Record that the policy file of ``version`` was seeded."""
        await self._kv.put(FILE, version.encode())
