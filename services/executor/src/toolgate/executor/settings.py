"""Settings of the executor service (environment prefix ``TOOLGATE_EXECUTOR_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from toolgate.shared.settings import ServiceSettings

__all__ = ["ExecutorSettings"]


class ExecutorSettings(ServiceSettings):
    """Where tools run and how long an idempotency record is kept."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_EXECUTOR_", extra="ignore")

    sandbox_root: Path = Field(
        default=Path("sandbox"),
        description="Root directory of the file_system tool; nothing outside it is reachable. "
        "Env: TOOLGATE_EXECUTOR_SANDBOX_ROOT.",
    )
    mcp_servers_file: Path | None = Field(
        default=None,
        description="TOML file of MCP servers to run tools on (unset: none). Env: TOOLGATE_EXECUTOR_MCP_SERVERS_FILE.",
    )
    idempotency_ttl_s: float = Field(
        default=86_400.0,
        description="Seconds an idempotency record (and its replayable receipt) is kept. "
        "Env: TOOLGATE_EXECUTOR_IDEMPOTENCY_TTL_S.",
    )
    decision_max_age_s: float = Field(
        default=3_600.0,
        description="Seconds a decision stays runnable; an older one ends denied (decision_expired) and runs "
        "nothing. Keep it above the approvals TTL and below the idempotency TTL. "
        "Env: TOOLGATE_EXECUTOR_DECISION_MAX_AGE_S.",
    )
    stale_grace_s: float = Field(
        default=30.0,
        description="Seconds past a tool's timeout after which an unfinished run counts as abandoned. "
        "Env: TOOLGATE_EXECUTOR_STALE_GRACE_S.",
    )
