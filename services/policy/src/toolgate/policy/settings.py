"""Settings of the policy service (environment prefix ``TOOLGATE_POLICY_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from toolgate.shared.settings import ServiceSettings

__all__ = ["PolicySettings"]


class PolicySettings(ServiceSettings):
    """Where the policy lives and how big a request may be."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_POLICY_", extra="ignore")

    policy_file: Path = Field(
        default=Path("deploy/policy/policy.cedar"),
        description="Cedar policy file. Missing or invalid: every request is denied. Env: TOOLGATE_POLICY_POLICY_FILE.",
    )
    principals_file: Path = Field(
        default=Path("deploy/policy/principals.toml"),
        description="Principal directory (agents' autonomy and roles, approvers). "
        "Env: TOOLGATE_POLICY_PRINCIPALS_FILE.",
    )
    max_request_bytes: int = Field(
        default=65_536,
        description="Largest accepted tool request body, bytes; larger is refused. "
        "Env: TOOLGATE_POLICY_MAX_REQUEST_BYTES.",
    )
    admitted_ttl_s: float = Field(
        default=3600.0,
        gt=0,
        description="Seconds an admitted request id is remembered, so a redelivered request or a repeated "
        "re-check never consumes its rate budget twice. Keep it above TOOLGATE_APPROVALS_TTL_S (a grant is "
        "re-checked only before its approval expires) and above the policy consumer's redelivery span "
        "(20 deliveries, about 20 minutes). Env: TOOLGATE_POLICY_ADMITTED_TTL_S.",
    )
