"""The engine in force, rebuilt whole when the policy text or the registry changes.

Each decision reads :attr:`PolicyHolder.engine` once and decides with that engine only, so a
switch is atomic: a decision is made wholly under the old policy or wholly under the new one,
never half of each. A text that does not build leaves the engine in force (or none, at start)
and is reported by :attr:`PolicyHolder.problem`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from effectgate.contracts.rpc.listing import Readiness
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.errors import PolicyInvalid

__all__ = ["Builder", "PolicyHolder"]

log = logging.getLogger("effectgate.policy")

Builder = Callable[[str, Sequence[ToolDescriptor]], PolicyEngine]
"""Builds an engine from a policy text and the registered descriptors (raises :class:`PolicyInvalid`)."""


class PolicyHolder:
    """Holds the current :class:`PolicyEngine` (``None``: no valid policy, every call denied).

    Args:
        engine: the engine in force at start (tests hand one in directly).
        build: how an engine is built; ``None``: the engine never changes.
        text: the policy text meant to be in force (it may not have built yet; ``""``: none yet).
        broken: why this holder cannot build (its principal directory or attributes did not load).
    """

    def __init__(
        self, engine: PolicyEngine | None = None, build: Builder | None = None, text: str = "", broken: str = ""
    ) -> None:
        self._engine, self._build, self._broken = engine, build, broken
        self.text = engine.text if engine is not None else text
        self.problem: str | None = broken or None

    @property
    def engine(self) -> PolicyEngine | None:
        """The engine in force now."""
        return self._engine

    def swap(self, engine: PolicyEngine | None) -> None:
        """Put ``engine`` in force for every decision that starts from now on."""
        self._engine = engine

    def candidate(self, text: str, descriptors: Sequence[ToolDescriptor]) -> PolicyEngine:
        """Build ``text`` over ``descriptors`` without putting it in force.

        Raises:
            PolicyInvalid: the text does not build, or this holder cannot build at all
                (its principal directory or attributes did not load; the reason says so).
        """
        if self._build is None:
            raise PolicyInvalid(f"this policy replica cannot build policies: {self._broken or 'no builder'}")
        return self._build(text, descriptors)

    def install(self, engine: PolicyEngine) -> None:
        """Put a built ``engine`` (and its text) in force for every decision that starts from now on."""
        self.text, self.problem = engine.text, None
        self.swap(engine)

    def adopt(self, text: str, descriptors: Sequence[ToolDescriptor]) -> PolicyEngine:
        """Build ``text`` and put it in force; on failure nothing changes.

        Raises:
            PolicyInvalid: the text does not build (the engine in force stays).
        """
        engine = self.candidate(text, descriptors)
        self.install(engine)
        return engine

    def rebuild(self, descriptors: Sequence[ToolDescriptor]) -> None:
        """Build the text in force again over ``descriptors`` (the registry changed); never raises."""
        if not self.text and self._engine is None:
            return  # no policy meant to be in force yet: nothing to build
        try:
            self.adopt(self.text, descriptors)
        except Exception as error:  # whatever a registered tool holds, the engine in force stays
            reason = error.reason if isinstance(error, PolicyInvalid) else f"cannot build the policy: {error!r}"
            if reason != self.problem:
                log.error("policy not rebuilt, the one in force stays: %s", reason)
            self.problem = reason

    def readiness(self) -> Readiness:
        """Ready when an engine with at least one policy is in force."""
        engine = self._engine
        if engine is None:
            return Readiness(ready=False, reason=f"no valid policy is loaded: {self.problem or 'none given'}")
        if not engine.policy_ids:
            reason = "the policy holds no policy: every request will be denied"
            return Readiness(ready=False, reason=reason, version=engine.version)
        loaded = f"{len(engine.policy_ids)} policies loaded, version {engine.version}"
        return Readiness(ready=True, reason=loaded, version=engine.version)
