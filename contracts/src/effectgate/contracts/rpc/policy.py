"""Bodies of the policy service's operator requests: ``tg.policy.publish``, ``tg.policy.budgets`` and ``.resolve``."""

from __future__ import annotations

import msgspec

__all__ = [
    "BudgetCounter",
    "CountersQuery",
    "CountersReply",
    "Held",
    "PublishReply",
    "PublishRequest",
    "ResolveQuery",
    "ResolveReply",
]


class PublishRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.policy.publish``: the Cedar policy text to put in force."""

    text: str


class PublishReply(msgspec.Struct, frozen=True, kw_only=True):
    """Answer of ``tg.policy.publish``.

    Attributes:
        ok: the policy is in force now (on this replica; the others follow within seconds).
        version: its version, ``sha256:<hex>``; ``None`` when refused.
        reason: what happened, or what is wrong with the policy (pointed: names the
            policy's ``@id`` and the field).
    """

    ok: bool
    version: str | None
    reason: str


class Held(msgspec.Struct, frozen=True, array_like=True):
    """One request in a counter: its :class:`RecordState` and units."""

    state: str
    units: int


class BudgetCounter(msgspec.Struct, frozen=True, kw_only=True):
    """One budget's counter for one principal and window, with the records it sums.

    Attributes:
        principal / budget / start_s / window_s / limit_units: what it counts.
        used_units: committed spend. reserved_units: reserved and uncertain spend.
        records: request id to what that request holds here.
    """

    principal: str
    budget: str
    start_s: int
    window_s: int
    limit_units: int
    used_units: int
    reserved_units: int
    records: dict[str, Held]


class CountersQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Ask for one page of counters: from ``cursor`` (0: the first), about ``count`` of them."""

    cursor: int = 0
    count: int = 100


class CountersReply(msgspec.Struct, frozen=True, kw_only=True):
    """One page of counters; ``cursor`` 0 after the last page; ``ok`` False with ``reason`` when refused."""

    ok: bool
    reason: str = ""
    counters: list[BudgetCounter] = msgspec.field(default_factory=list)
    cursor: int = 0


class ResolveQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Resolve an uncertain reservation: ``ran`` commits it, otherwise it is released."""

    principal: str
    request_id: str
    ran: bool


class ResolveReply(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the reservation moved, its state now, and why."""

    ok: bool
    reason: str
    state: str | None = None
