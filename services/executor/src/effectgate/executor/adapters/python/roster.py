"""Which worker instances are alive and what each serves, and what that makes each Python tool's state (pure).

An instance counts for :data:`~effectgate.contracts.tools.hosting.ALIVE_TTL_S` after its last
:class:`WorkerAlive`; one announcing ``stopping`` stops counting at once. A published Python
tool is ``ready`` while a live instance of its worker serves the published latest descriptor's
digest, else ``unavailable``: no live instance serves it, or those that do declare another digest
(the rug-pull rule: what runs must be what the operator published). At most :data:`MAX_INSTANCES`
instances of one worker count at once: a new one above them is ignored until one lapses, so a flood
of announcements under one worker's credentials cannot grow what every judgement walks. Times:
monotonic seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from effectgate.contracts.tools.adapters import PYTHON, adapter_kind
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import ALIVE_TTL_S, ServedTool, WorkerAlive

__all__ = ["MAX_INSTANCES", "Roster", "Verdict", "worker_of"]

MAX_INSTANCES = 64
"""Live instances of one worker the roster counts at most."""

Verdict = tuple[str, str]
"""``(state, reason)`` of one tool."""


def worker_of(descriptor: ToolDescriptor) -> str | None:
    """The ``<worker>`` of a ``python:<worker>`` descriptor; ``None`` for any other adapter."""
    known = adapter_kind(descriptor.adapter)
    return known[1] if known is not None and known[0] == PYTHON else None


@dataclass
class Roster:
    """The live instances of every worker.

    Attributes:
        ttl_s: how long an announcement counts, seconds.
    """

    ttl_s: float = ALIVE_TTL_S
    _heard: dict[tuple[str, str], tuple[float, tuple[ServedTool, ...]]] = field(default_factory=dict)

    def heard(self, worker: str, alive: WorkerAlive, now: float) -> bool:
        """Note ``alive``, announced on worker ``worker``'s subject at ``now``; ``False``: ignored (module doc)."""
        key = (worker, alive.instance)
        if alive.stopping:
            self._heard.pop(key, None)
            return True
        if key not in self._heard:
            self._forget(now)
            if sum(name == worker for name, _ in self._heard) >= MAX_INSTANCES:
                return False
        self._heard[key] = (now, alive.tools)
        return True

    def served(self, worker: str, tool: str, now: float) -> list[ServedTool]:
        """What the live instances of ``worker`` declare of ``tool``."""
        self._forget(now)
        instances = [tools for (name, _), (_, tools) in sorted(self._heard.items()) if name == worker]
        return [served for tools in instances for served in tools if served.tool == tool]

    def verdict(self, descriptor: ToolDescriptor, now: float) -> Verdict | None:
        """The state of a published tool (module doc); ``None`` for a tool no worker hosts."""
        worker = worker_of(descriptor)
        if worker is None:
            return None
        served = self.served(worker, descriptor.name, now)
        if not served:
            return "unavailable", f"no live instance of worker {worker} serves {descriptor.name}"
        published = descriptor_digest(descriptor)
        if any(entry.digest == published for entry in served):
            return "ready", f"worker {worker} serves {descriptor.name} {descriptor.version}"
        declared = served[0]
        return "unavailable", (
            f"worker {worker} declares {declared.tool} {declared.version} {declared.digest}, published "
            f"{descriptor.version} {published}: publish its declaration, or restart it on the published one"
        )

    def _forget(self, now: float) -> None:
        for key in [key for key, (at, _) in self._heard.items() if now - at > self.ttl_s]:
            del self._heard[key]
