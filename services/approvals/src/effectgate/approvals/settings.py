"""Settings of the approvals service (environment prefix ``EFFECTGATE_APPROVALS_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from effectgate.shared.config.settings import ServiceSettings

__all__ = ["ApprovalsSettings"]


class ApprovalsSettings(ServiceSettings):
    """Who may approve and for how long an approval stays open."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_APPROVALS_", extra="ignore")

    principals_file: Path = Field(
        default=Path("deploy/policy/principals.toml"),
        description="Principal directory whose [approvers] table lists approvers and roles. "
        "Env: EFFECTGATE_APPROVALS_PRINCIPALS_FILE.",
    )
    ttl_s: float = Field(default=900.0, description="Seconds an approval stays open. Env: EFFECTGATE_APPROVALS_TTL_S.")
    sweep_interval_s: float = Field(
        default=1.0, description="Seconds between expiry sweeps. Env: EFFECTGATE_APPROVALS_SWEEP_INTERVAL_S."
    )
