"""Settings of the policy service (environment prefix ``EFFECTGATE_POLICY_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from effectgate.shared.config.settings import ServiceSettings

__all__ = ["PolicySettings"]


class PolicySettings(ServiceSettings):
    """Where the policy lives and how big a request may be."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_POLICY_", extra="ignore")

    policy_file: Path = Field(
        default=Path("deploy/policy/policy.cedar"),
        description="Cedar policy file, published into the policy bucket at start when it changed since it was "
        "last seeded (else the policy published since stays in force). Invalid: refused, the policy in force "
        "stays; none at all: every request is denied. Env: EFFECTGATE_POLICY_POLICY_FILE.",
    )
    principals_file: Path = Field(
        default=Path("deploy/policy/principals.toml"),
        description="Principal directory (agents' autonomy and roles, approvers). "
        "Env: EFFECTGATE_POLICY_PRINCIPALS_FILE.",
    )
    attributes_file: Path = Field(
        default=Path("deploy/policy/attributes.toml"),
        description="Principal and tool attributes for policies (allow-lists, per-agent limits, tool tags) and "
        "their declared Cedar types. Missing: none. Invalid: every request is denied. "
        "Env: EFFECTGATE_POLICY_ATTRIBUTES_FILE.",
    )
    budgets_file: Path = Field(
        default=Path("deploy/policy/budgets.toml"),
        description="Spend budgets per principal (and tool or operation) over fixed windows. Missing: no budgets. "
        "Unreadable or invalid: every request is denied and the service is not ready. "
        "Env: EFFECTGATE_POLICY_BUDGETS_FILE.",
    )
    budget_keep_s: int = Field(
        default=604_800,
        ge=0,
        description="Seconds a budget counter and its records are kept after its window ends, for "
        "`effectgate budgets check` and late receipts (default 7 days, the stream's retention). "
        "Env: EFFECTGATE_POLICY_BUDGET_KEEP_S.",
    )
    registry_refresh_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between looks at the registry; when the registered tools changed, the policy is "
        "built again over their argument types (context.args). Env: EFFECTGATE_POLICY_REGISTRY_REFRESH_S.",
    )
    follow_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between looks at the policy in force in the policy bucket, a safety net beside the "
        "subscription that switches every replica as soon as a policy is published. "
        "Env: EFFECTGATE_POLICY_FOLLOW_INTERVAL_S.",
    )
    max_policy_bytes: int = Field(
        default=262_144,
        gt=0,
        description="Largest policy text accepted by `effectgate policy publish` (tg.policy.publish), bytes of "
        "UTF-8; larger is refused. Env: EFFECTGATE_POLICY_MAX_POLICY_BYTES.",
    )
    max_request_bytes: int = Field(
        default=65_536,
        description="Largest accepted tool request body, bytes; larger is refused. "
        "Env: EFFECTGATE_POLICY_MAX_REQUEST_BYTES.",
    )
    admitted_ttl_s: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds an admitted request id is remembered, so a redelivered request or a repeated "
        "re-check never consumes its rate budget twice. Keep it above EFFECTGATE_APPROVALS_TTL_S (a grant is "
        "re-checked only before its approval expires) and above the policy consumer's redelivery span "
        "(20 deliveries, about 20 minutes). Env: EFFECTGATE_POLICY_ADMITTED_TTL_S.",
    )
