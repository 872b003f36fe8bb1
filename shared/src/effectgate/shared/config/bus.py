"""How the streams and buckets effectgate owns are replicated and limited (``EFFECTGATE_BUS_*``, ``[bus]``).

Read by the registry, which provisions the bus (:func:`effectgate.shared.stores.provision.ensure_bus`),
and by the services that watch how full the record is. ``docs/explanation/replication-and-limits.md``
gives the argument; ``docs/reference/settings.md`` lists the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from effectgate.shared.config.effectgate_file import EffectgateConfig
from effectgate.shared.config.settings import FileSettings

__all__ = ["RECORD_MAX_AGE_S", "RESULTS_MAX_AGE_S", "STORE_HIGH_WATER", "BusLayout", "BusSettings"]

RECORD_MAX_AGE_S = 7 * 24 * 3600.0
"""How long the record stream keeps events by default, seconds."""

RESULTS_MAX_AGE_S = 8 * 24 * 3600.0
"""How long stored results are kept, seconds: longer than any idempotency record that replays them."""

STORE_HIGH_WATER = 0.9
"""Share of the record's byte limit above which new requests are refused ``store_full`` (by default)."""


@dataclass(frozen=True)
class BusLayout:
    """The replica count and limits the bus is provisioned and converged to.

    Attributes:
        replicas: copies of every stream and bucket (1: one server; 3: a cluster that survives one loss).
        record_max_age_s: how long the record stream keeps events, seconds.
        record_max_bytes: the record stream's size limit, bytes; ``None``: unlimited. New messages
            are refused at the limit (discard ``new``), never the oldest dropped.
        results_max_age_s: how long stored results are kept, seconds.
        store_high_water: share of ``record_max_bytes`` above which new requests are refused.
    """

    replicas: int = 1
    record_max_age_s: float = RECORD_MAX_AGE_S
    record_max_bytes: int | None = None
    results_max_age_s: float = RESULTS_MAX_AGE_S
    store_high_water: float = STORE_HIGH_WATER


class BusSettings(FileSettings):
    """The deployment's bus layout: environment ``EFFECTGATE_BUS_*``, then ``[bus]`` of ``effectgate.toml``."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_BUS_", extra="ignore", populate_by_name=True)

    replicas: int = Field(
        default=1,
        ge=1,
        le=5,
        description="Copies of every stream and KV bucket effectgate owns: 1 on one nats-server, 3 on a cluster "
        "(survives the loss of one node). Provisioning converges an existing deployment to it. "
        "File: [bus] replicas. Env: EFFECTGATE_BUS_REPLICAS.",
    )
    record_max_age_s: float = Field(
        default=RECORD_MAX_AGE_S,
        gt=0,
        description="How long the record stream keeps events, seconds (default 7 days). "
        "File: [bus] record_max_age_s. Env: EFFECTGATE_BUS_RECORD_MAX_AGE_S.",
    )
    record_max_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Size limit of the record stream, bytes (unset: unlimited). At the limit new messages are "
        "refused (discard new), never the oldest dropped; needs nats-server 2.10+. "
        "File: [bus] record_max_bytes. Env: EFFECTGATE_BUS_RECORD_MAX_BYTES.",
    )
    store_high_water: float = Field(
        default=STORE_HIGH_WATER,
        gt=0,
        lt=1,
        description="Share of record_max_bytes above which the store is reported nearly full and new requests are "
        "denied store_full, keeping room for the decisions and receipts of requests already admitted. "
        "File: [bus] store_high_water. Env: EFFECTGATE_BUS_STORE_HIGH_WATER.",
    )

    @classmethod
    def from_config(cls, config: EffectgateConfig) -> dict[str, Any]:
        """The ``[bus]`` keys that are set."""
        table = {"replicas": config.bus.replicas, "record_max_age_s": config.bus.record_max_age_s}
        table |= {"record_max_bytes": config.bus.record_max_bytes, "store_high_water": config.bus.store_high_water}
        return {key: value for key, value in table.items() if value is not None}

    def layout(self) -> BusLayout:
        """These settings as the :class:`BusLayout` provisioning takes."""
        return BusLayout(
            self.replicas, self.record_max_age_s, self.record_max_bytes, RESULTS_MAX_AGE_S, self.store_high_water
        )
