"""Settings common to every service, read from the environment by pydantic-settings.

Each service subclasses :class:`ServiceSettings` with its own ``TOOLGATE_<SERVICE>_``
prefix; the connection URLs keep their conventional names ``NATS_URL`` and ``REDIS_URL``.
Settings are read only in a service's ``app.py``.

Precedence, highest first: values passed to the constructor, environment variables,
``toolgate.toml`` (the file named by ``TOOLGATE_CONFIG``; each service takes the keys it
reads through :meth:`ServiceSettings.from_config`), then the defaults below.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from toolgate.shared.config import CONFIG_ENV, ToolgateConfig, load_config

__all__ = ["MCP_SERVERS_ENV", "ConfigFileSource", "ServiceSettings", "deprecated_mcp_env", "named_mcp_servers_file"]

MCP_SERVERS_ENV = (
    "TOOLGATE_MCP_SERVERS_FILE",
    "TOOLGATE_REGISTRY_MCP_SERVERS_FILE",
    "TOOLGATE_EXECUTOR_MCP_SERVERS_FILE",
)
"""The one MCP servers variable the registry and the executor both read, then its deprecated aliases
(each service used to read only its own, and setting one made every call end ``unknown_adapter``)."""


def deprecated_mcp_env() -> str | None:
    """A warning naming the deprecated MCP servers variables set, or ``None``."""
    used = [name for name in MCP_SERVERS_ENV[1:] if os.environ.get(name)]
    if not used:
        return None
    return f"{', '.join(used)} deprecated: set {MCP_SERVERS_ENV[0]} (read by the registry and the executor)"


def named_mcp_servers_file() -> tuple[str, str] | None:
    """The MCP servers file the registry and the executor read from the environment.

    Returns:
        ``(variable, value)`` of the first of :data:`MCP_SERVERS_ENV` that is set (even to
        ``""``, which the services read as ``.``), or ``None`` when none is.
    """
    return next(((name, os.environ[name]) for name in MCP_SERVERS_ENV if name in os.environ), None)


class ServiceSettings(BaseSettings):
    """Connection and identity settings shared by all services."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", extra="ignore", populate_by_name=True)

    config_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices(CONFIG_ENV),
        description="toolgate.toml: MCP servers, tool descriptor dirs and limits, chat; environment variables "
        "override it. Env: TOOLGATE_CONFIG.",
    )

    nats_url: str = Field(
        default="nats://127.0.0.1:4222",
        validation_alias=AliasChoices("NATS_URL"),
        description="NATS server URL (JetStream enabled). Env: NATS_URL.",
    )
    nats_ca_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("TOOLGATE_NATS_CA_FILE"),
        description="CA certificate (PEM) the NATS server's certificate is verified with; set: TLS from the "
        "first byte (the server needs tls { handshake_first: true }). Env: TOOLGATE_NATS_CA_FILE.",
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        validation_alias=AliasChoices("REDIS_URL"),
        description="Redis URL for idempotency, rate limits, spend budgets and approvals. Env: REDIS_URL.",
    )
    keys_dir: Path = Field(
        default=Path("keys"),
        validation_alias=AliasChoices("TOOLGATE_KEYS_DIR"),
        description="This service's own keys directory: its private key and the public keys it verifies "
        "(toolgate.shared.keyring). Env: TOOLGATE_KEYS_DIR.",
    )
    redis_timeout_s: float = Field(
        default=0.5,
        validation_alias=AliasChoices("TOOLGATE_REDIS_TIMEOUT_S"),
        description="Socket and connect timeout of every Redis call, seconds; a call on a broken connection "
        "is retried once, a call that timed out never. Env: TOOLGATE_REDIS_TIMEOUT_S.",
    )
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP/HTTP collector base URL; traces are exported only when set. "
        "Env: OTEL_EXPORTER_OTLP_ENDPOINT.",
    )
    http_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of the health and metrics HTTP server (/livez, /readyz, /metrics); unset: none. "
        "Env: TOOLGATE_<SERVICE>_HTTP_PORT.",
    )
    http_socket_fd: int | None = Field(
        default=None,
        ge=0,
        description="A listening TCP socket handed down by the process that started the service (`toolgate up`, "
        "the tests), served instead of binding http_host:http_port: its port can never be lost to another "
        "program. Env: TOOLGATE_<SERVICE>_HTTP_SOCKET_FD.",
    )
    http_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address the health and metrics HTTP server listens on. Env: TOOLGATE_<SERVICE>_HTTP_HOST.",
    )

    @classmethod
    def from_config(cls, config: ToolgateConfig) -> dict[str, Any]:
        """The settings this service takes from ``toolgate.toml``, by field name (none here)."""
        return {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Constructor values, then the environment, then ``toolgate.toml``, then the defaults."""
        return init_settings, env_settings, dotenv_settings, ConfigFileSource(settings_cls, init_settings)


class ConfigFileSource(PydanticBaseSettingsSource):
    """The values a :class:`ServiceSettings` class takes from ``toolgate.toml``.

    The file is the constructor's ``config_file``, else ``TOOLGATE_CONFIG``; neither: no values.

    Raises:
        toolgate.shared.config.ConfigInvalid: (when called) the file is unreadable or invalid.
    """

    def __init__(self, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        given = init_settings()
        self._given = given.get("config_file") or given.get(CONFIG_ENV)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` gives every value at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """Field name to value, for the fields the file sets."""
        config = load_config(Path(self._given) if self._given else None)
        if config.path is None or not issubclass(self.settings_cls, ServiceSettings):
            return {}
        return self.settings_cls.from_config(config)
