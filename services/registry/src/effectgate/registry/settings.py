"""Settings of the registry service (environment prefix ``EFFECTGATE_REGISTRY_``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from effectgate.shared.config.effectgate_file import EffectgateConfig
from effectgate.shared.config.settings import MCP_SERVERS_ENV, ServiceSettings

__all__ = ["RegistrySettings"]


class RegistrySettings(ServiceSettings):
    """Which descriptors and MCP servers the registry publishes at start-up."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_REGISTRY_", extra="ignore", populate_by_name=True)

    descriptors_dir: Annotated[list[Path], NoDecode] = Field(
        default=[Path("deploy/tools")],
        description="Directories of tool descriptor JSON files published at start-up (several: separated by "
        f"{os.pathsep!r}; empty: none). File: [tools] descriptor_dirs. Env: EFFECTGATE_REGISTRY_DESCRIPTORS_DIR.",
    )
    mcp_servers_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices(*MCP_SERVERS_ENV),
        description="File of MCP servers whose tool listings are imported at start-up: an MCP servers file or a "
        "effectgate.toml (unset: the [mcp.servers] of EFFECTGATE_CONFIG, else none). Env: EFFECTGATE_MCP_SERVERS_FILE "
        "(deprecated: EFFECTGATE_REGISTRY_MCP_SERVERS_FILE, EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE).",
    )
    mcp_timeout_s: float = Field(
        default=30.0, description="Seconds to list one MCP server's tools. Env: EFFECTGATE_REGISTRY_MCP_TIMEOUT_S."
    )

    @field_validator("descriptors_dir", mode="before")
    @classmethod
    def _path_list(cls, value: Any) -> Any:
        """``None`` → none; one path, or several separated by ``os.pathsep`` → a list."""
        if value is None:
            return []
        if isinstance(value, str):
            return [part for part in value.split(os.pathsep) if part]
        return [value] if isinstance(value, Path) else value

    @classmethod
    def from_config(cls, config: EffectgateConfig) -> dict[str, Any]:
        """``[tools] descriptor_dirs``, and the file itself as the MCP servers file when it declares any."""
        chosen: dict[str, Any] = {"mcp_servers_file": config.path} if config.mcp.servers else {}
        dirs = config.descriptor_dirs()
        return chosen if dirs is None else {**chosen, "descriptors_dir": dirs}
