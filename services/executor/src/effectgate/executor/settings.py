"""Settings of the executor service (environment prefix ``EFFECTGATE_EXECUTOR_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict

from effectgate.shared.config.effectgate_file import EffectgateConfig
from effectgate.shared.config.settings import MCP_SERVERS_ENV, ServiceSettings

__all__ = ["ExecutorSettings"]


class ExecutorSettings(ServiceSettings):
    """Where tools run and how long an idempotency record is kept."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_EXECUTOR_", extra="ignore", populate_by_name=True)

    sandbox_root: Path = Field(
        default=Path("sandbox"),
        description="Root directory of the file_system tool; nothing outside it is reachable. "
        "Env: EFFECTGATE_EXECUTOR_SANDBOX_ROOT.",
    )
    mcp_servers_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices(*MCP_SERVERS_ENV),
        description="File of MCP servers to run tools on: an MCP servers file or an effectgate.toml (unset: the "
        "[mcp.servers] of EFFECTGATE_CONFIG, else none). Env: EFFECTGATE_MCP_SERVERS_FILE (deprecated: "
        "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE, EFFECTGATE_REGISTRY_MCP_SERVERS_FILE).",
    )
    mcp_start_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds one start of an MCP server may take (spawn, handshake, first listing) before it is "
        "unavailable and started again; the executor takes calls meanwhile, refusing those of a server still "
        "starting as tool_unavailable. Env: EFFECTGATE_EXECUTOR_MCP_START_TIMEOUT_S.",
    )
    mcp_breaker_faults: int = Field(
        default=5,
        ge=1,
        description="Consecutive faults (calls not answered: not sent, timed out, connection lost, broken replies; a "
        "tool's own error answer is none) after which an MCP server's circuit opens: its tools are degraded and "
        "refused as tool_unavailable. Env: EFFECTGATE_EXECUTOR_MCP_BREAKER_FAULTS.",
    )
    mcp_breaker_cool_down_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds an open circuit refuses calls before one probe call is let through; its success "
        "closes the circuit. Env: EFFECTGATE_EXECUTOR_MCP_BREAKER_COOL_DOWN_S.",
    )
    secrets_file: Path | None = Field(
        default=None,
        description="Text file of extra secret values, one per line (values under 8 characters are ignored): "
        "any occurrence in a result, reason or log line is redacted, like the env values of the MCP servers. "
        "Env: EFFECTGATE_EXECUTOR_SECRETS_FILE.",
    )
    idempotency_ttl_s: float = Field(
        default=86_400.0,
        description="Seconds an idempotency record (and its replayable receipt) is kept. "
        "Env: EFFECTGATE_EXECUTOR_IDEMPOTENCY_TTL_S.",
    )
    decision_max_age_s: float = Field(
        default=3_600.0,
        description="Seconds a decision stays runnable; an older one ends denied (decision_expired) and runs "
        "nothing. Keep it above the approvals TTL and below the idempotency TTL. "
        "Env: EFFECTGATE_EXECUTOR_DECISION_MAX_AGE_S.",
    )
    stale_grace_s: float = Field(
        default=30.0,
        description="Seconds past a tool's timeout after which an unfinished run counts as abandoned. "
        "Env: EFFECTGATE_EXECUTOR_STALE_GRACE_S.",
    )
    recheck_after_s: float = Field(
        default=5.0,
        description="Seconds after which a decision is re-checked with the policy service before it runs "
        "(a grant always is). Env: EFFECTGATE_EXECUTOR_RECHECK_AFTER_S.",
    )
    shutdown_grace_s: float = Field(
        default=10.0,
        description="Seconds in-flight calls get to finish on SIGTERM; what still runs then ends uncertain "
        "(writes) or failed (reads). Env: EFFECTGATE_EXECUTOR_SHUTDOWN_GRACE_S.",
    )
    backstop_undecided_s: float = Field(
        default=300.0,
        description="Seconds a request may wait for a decision before the backstop ends it (failed, nothing "
        "ran). Env: EFFECTGATE_EXECUTOR_BACKSTOP_UNDECIDED_S.",
    )
    backstop_margin_s: float = Field(
        default=60.0,
        description="Seconds past a stage's own deadline before the backstop ends the request. "
        "Env: EFFECTGATE_EXECUTOR_BACKSTOP_MARGIN_S.",
    )
    reconcile_backoff_s: float = Field(
        default=1.0,
        gt=0,
        description="Seconds before the reconciler's second call of an uncertain call's reconcile operation; "
        "doubled for each later one. Env: EFFECTGATE_EXECUTOR_RECONCILE_BACKOFF_S.",
    )
    reconcile_max_backoff_s: float = Field(
        default=60.0,
        gt=0,
        description="Longest wait between two reconcile calls, seconds. "
        "Env: EFFECTGATE_EXECUTOR_RECONCILE_MAX_BACKOFF_S.",
    )
    reconcile_attempts: int = Field(
        default=12,
        ge=1,
        description="Reconcile calls made at most for one uncertain call before it is resolved unknown and left "
        "to the operator. Env: EFFECTGATE_EXECUTOR_RECONCILE_ATTEMPTS.",
    )
    reconcile_max_age_s: float = Field(
        default=86_400.0,
        gt=0,
        description="Seconds after its uncertain receipt past which a call is no longer reconciled but resolved "
        "unknown. Env: EFFECTGATE_EXECUTOR_RECONCILE_MAX_AGE_S.",
    )
    inline_result_bytes: int = Field(
        default=262_144,
        description="Largest result JSON carried in the receipt, bytes; larger results are kept compressed "
        "in the results stream and referenced. Env: EFFECTGATE_EXECUTOR_INLINE_RESULT_BYTES.",
    )
    max_result_bytes: int = Field(
        default=16_777_216,
        description="Largest result JSON kept at all, bytes (a larger read fails; a larger write's result is "
        "withheld). Env: EFFECTGATE_EXECUTOR_MAX_RESULT_BYTES.",
    )

    @classmethod
    def from_config(cls, config: EffectgateConfig) -> dict[str, Any]:
        """The file itself as the MCP servers file when it declares any."""
        return {"mcp_servers_file": config.path} if config.mcp.servers else {}
