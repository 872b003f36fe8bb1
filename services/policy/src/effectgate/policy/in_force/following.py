"""Every replica follows the policy in force: a published version is built and swapped in without a restart.

Two triggers, one check (:meth:`Follower.check`): a core NATS subscription on the ``current``
key's subject (``$KV.EFFECTGATE_POLICY.current``) wakes the follower the moment a policy is
published, and a poll every ``interval_s`` seconds catches a wake-up lost while the connection
was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from effectgate.contracts.security import SecurityKind
from effectgate.contracts.tools.descriptors import DescriptorSource
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.ports import PolicyStore
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.policy_kv import PublishedPolicy, policy_digest

__all__ = ["Follower", "follow_policy"]

log = logging.getLogger("effectgate.policy")

Tried = tuple[str, tuple[tuple[str, str], ...]]
"""A version and the registry listing (``(tool, version)`` pairs) it was tried with."""


class Follower:
    """Brings one replica's holder to the version in ``current``.

    Args:
        holder: the replica's engine in force.
        store: the policy bucket.
        descriptors: the registry (a policy is built over its latest descriptors).
        reporter: reports a version this replica cannot apply.
    """

    def __init__(
        self, holder: PolicyHolder, store: PolicyStore, descriptors: DescriptorSource, reporter: SecurityReporter
    ) -> None:
        self._holder, self._store, self._descriptors, self._reporter = holder, store, descriptors, reporter
        self._refused: Tried | None = None
        self._unbelieved: str | None = None

    async def check(self) -> None:
        """Apply the version in ``current`` if this replica does not hold it yet; never raises."""
        try:
            entry = await self._store.current()
        except Exception as error:  # the bus is down: the engine in force stays
            log.warning("policy bucket not readable; the policy in force stays: %r", error)
            return
        if entry.problem is not None and entry.problem != self._unbelieved:
            log.error("the policy bucket's current entry is not a policy, nothing changes: %s", entry.problem)
        self._unbelieved = entry.problem
        if entry.policy is not None and entry.policy.version != policy_digest(self._holder.text):
            await self._apply(entry.policy)

    async def _apply(self, policy: PublishedPolicy) -> None:
        try:
            listed = await self._descriptors.list()
        except Exception as error:  # validated against the registry or not at all
            log.warning("registry not readable to build %s; the policy in force stays: %r", policy.version, error)
            return
        tried: Tried = (policy.version, tuple((d.name, d.version) for d in listed))
        if tried == self._refused:
            return
        try:
            self._holder.adopt(policy.text, listed)
        except PolicyInvalid as error:
            self._refused = tried
            self._not_applied(policy, error.reason)
            return
        log.info("policy version %s now in force (published %s, source %s)", *_about(policy))

    def _not_applied(self, policy: PublishedPolicy, reason: str) -> None:
        engine = self._holder.engine
        kept = engine.version if engine else "none"
        log.error("ALARM: published policy %s not applied on this replica, %s stays: %s", policy.version, kept, reason)
        if engine is None:
            self._holder.problem = f"the published policy {policy.version} does not build here: {reason}"
        detail = f"published policy {policy.version} does not build here ({kept} stays in force): {reason}"
        self._reporter.report(SecurityKind.POLICY_NOT_APPLIED, reason_code="policy_invalid", detail=detail)


def _about(policy: PublishedPolicy) -> tuple[str, str, str]:
    return policy.version, policy.published_at.isoformat(), policy.source


async def follow_policy(follower: Follower, wake: asyncio.Event, interval_s: float) -> None:
    """Check at once, then whenever ``wake`` is set (a publication was seen) or ``interval_s`` seconds pass."""
    while True:
        await follower.check()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), interval_s)
        wake.clear()
