"""Putting a policy in force: validated by this replica's own build, then written to the policy bucket."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from effectgate.contracts.events import PolicyPublished
from effectgate.contracts.rpc.policy import PublishReply, PublishRequest
from effectgate.contracts.tools.descriptors import DescriptorSource
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.ports import PolicyStore
from effectgate.shared.stores.policy_kv import CurrentEntry, PolicyConflict, PublishedPolicy, policy_digest

__all__ = ["CAS_ATTEMPTS", "PublishReply", "PublishRequest", "Publisher", "refused", "should_seed"]

log = logging.getLogger("effectgate.policy")

CAS_ATTEMPTS = 5
"""Compare-and-swap attempts on ``current`` before a publication gives up."""

Announce = Callable[[PolicyPublished], Awaitable[None]]


def refused(reason: str) -> PublishReply:
    """A refusal: nothing changed."""
    return PublishReply(ok=False, version=None, reason=reason)


def should_seed(file_version: str, seeded: str | None, current: CurrentEntry) -> bool:
    """Whether a replica publishes its policy file at start.

    Yes when nothing is in force, or when the file changed since a replica last seeded it
    (``seeded``); no when the file is the one seeded before, so a policy published since
    (``effectgate policy publish``) survives a restart.
    """
    return current.policy is None or file_version != seeded


class Publisher:
    """Validates and publishes policies for one replica.

    Args:
        holder: this replica's engine in force (and how it builds one).
        store: the policy bucket.
        descriptors: the registry, whose latest descriptors a policy is built over.
        clock: current UTC time.
        announce: publishes the signed :class:`PolicyPublished` (may raise; logged).
    """

    def __init__(
        self,
        holder: PolicyHolder,
        store: PolicyStore,
        descriptors: DescriptorSource,
        clock: Callable[[], datetime],
        announce: Announce,
    ) -> None:
        self._holder, self._store, self._descriptors = holder, store, descriptors
        self._clock, self._announce = clock, announce

    async def publish(self, text: str, source: str) -> PublishReply:
        """Validate ``text`` and put it in force (see the module docstring); never raises.

        Args:
            text: Cedar policy text.
            source: ``cli`` or ``file``.
        """
        try:
            listed = await self._descriptors.list()
        except Exception as error:  # the registry is down: nothing is validated, nothing changes
            log.warning("registry not readable to validate a policy: %r", error)
            return refused("the registry cannot be read to validate the policy: nothing changed (fail closed)")
        try:
            engine = self._holder.candidate(text, listed)
        except PolicyInvalid as error:
            return refused(error.reason)
        if source == "cli" and not engine.policy_ids:  # one wrong file would hide every tool from every agent
            return refused("the text holds no policy: every request would be denied; nothing changed")
        try:
            return await self._put_in_force(engine.text, source, lambda: self._holder.install(engine))
        except Exception as error:  # the bucket is unreachable: the policy in force stays
            log.error("policy %s not published: %r", engine.version, error)
            return refused(f"the policy bucket cannot be written ({type(error).__name__}): nothing changed")

    async def _put_in_force(self, text: str, source: str, install: Callable[[], None]) -> PublishReply:
        version = policy_digest(text)
        for _ in range(CAS_ATTEMPTS):
            entry = await self._store.current()
            if entry.policy is not None and entry.policy.version == version:
                install()
                return PublishReply(ok=True, version=version, reason=f"version {version} is already in force")
            policy = PublishedPolicy(version=version, text=text, published_at=self._clock(), source=source)
            try:
                revision = await self._store.replace_current(policy, entry.revision)
            except PolicyConflict:
                continue  # another publication came first: read again
            install()
            await self._recorded(policy, entry, revision)
            return PublishReply(ok=True, version=version, reason=f"version {version} is in force")
        return refused(f"the policy in force kept changing during {CAS_ATTEMPTS} attempts: nothing changed")

    async def _recorded(self, policy: PublishedPolicy, replaced: CurrentEntry, revision: int) -> None:
        previous = replaced.policy.version if replaced.policy else None
        log.info("policy version %s now in force (source %s, replaced %s)", policy.version, policy.source, previous)
        event = PolicyPublished(
            event_id=f"policy-published:{policy.version.removeprefix('sha256:')}:{revision}",
            occurred_at=policy.published_at,
            version=policy.version,
            source=policy.source,
            previous_version=previous,
            revision=revision,
        )
        try:
            await self._announce(event)
        except Exception as error:  # the policy is in force; only its record is missing
            log.error("ALARM: PolicyPublished for %s not recorded in the stream: %r", policy.version, error)

    async def seed(self, file_text: str) -> str:
        """Publish the policy file (source ``file``) when :func:`should_seed` says so; return what happened.

        Raises:
            nats.errors.Error: the policy bucket cannot be read.
        """
        version = policy_digest(file_text)
        entry, seeded = await self._store.current(), await self._store.file_version()
        if not should_seed(version, seeded, entry):
            assert entry.policy is not None
            kept = entry.policy
            return f"policy file unchanged since seeded; version {kept.version} ({kept.source}) stays in force"
        reply = await self.publish(file_text, "file")
        if not reply.ok:
            in_force = entry.policy.version if entry.policy else "none"
            return f"policy file refused, the policy in force ({in_force}) stays: {reply.reason}"
        await self._store.mark_file(version)
        return f"policy file seeded: {reply.reason}"

    async def retry_seed(self, file_text: str, interval_s: float) -> None:
        """While no policy is in force, seed ``file_text`` again whenever the registry's listing changes.

        Returns once a policy is in force (whoever published it); never raises otherwise.
        """
        tried: tuple[tuple[str, str], ...] | None = None
        while True:
            await asyncio.sleep(interval_s)
            try:
                if (await self._store.current()).policy is not None:
                    return
                listing = tuple((d.name, d.version) for d in await self._descriptors.list())
                if listing != tried:
                    tried = listing
                    log.info("policy file tried again: %s", await self.seed(file_text))
            except Exception as error:  # the bus is down: try again later
                log.warning("policy file not tried again: %r", error)
