"""Settings of the registry service (environment prefix ``TOOLGATE_REGISTRY_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from toolgate.shared.settings import ServiceSettings

__all__ = ["RegistrySettings"]


class RegistrySettings(ServiceSettings):
    """Which descriptors and MCP servers the registry publishes at start-up."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_REGISTRY_", extra="ignore")

    descriptors_dir: Path | None = Field(
        default=Path("deploy/tools"),
        description="Directory of tool descriptor JSON files published at start-up. "
        "Env: TOOLGATE_REGISTRY_DESCRIPTORS_DIR.",
    )
    mcp_servers_file: Path | None = Field(
        default=None,
        description="TOML file of MCP servers whose tool listings are imported at start-up (unset: none). "
        "Env: TOOLGATE_REGISTRY_MCP_SERVERS_FILE.",
    )
    mcp_timeout_s: float = Field(
        default=30.0, description="Seconds to list one MCP server's tools. Env: TOOLGATE_REGISTRY_MCP_TIMEOUT_S."
    )
