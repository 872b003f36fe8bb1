"""Settings common to every service, read from the environment by pydantic-settings.

Each service subclasses :class:`ServiceSettings` with its own ``EFFECTGATE_<SERVICE>_``
prefix; the connection URLs keep their conventional names ``NATS_URL`` and ``REDIS_URL``.
Settings are read only in a service's ``app.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, AliasChoices, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from effectgate.contracts.bus.catalog import FAIR_ACK_PENDING
from effectgate.shared.config.effectgate_file import CONFIG_ENV, EffectgateConfig, load_config
from effectgate.shared.runtime.redis_urls import checked_redis_url

__all__ = [
    "MCP_SERVERS_ENV",
    "NATS_IDENTITY_ENV",
    "ConfigFileSource",
    "FileSettings",
    "ServiceSettings",
    "deprecated_mcp_env",
    "named_mcp_servers_file",
]

MCP_SERVERS_ENV = (
    "EFFECTGATE_MCP_SERVERS_FILE",
    "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE",
    "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE",
)
"""The one MCP servers variable the registry and the executor both read, then its deprecated aliases
(each service used to read only its own, and setting one made every call end ``unknown_adapter``)."""


NATS_IDENTITY_ENV = (
    "EFFECTGATE_NATS_USER",
    "EFFECTGATE_NATS_PASSWORD",
    "EFFECTGATE_NATS_PASSWORD_FILE",
    "EFFECTGATE_NATS_TOKEN",
    "EFFECTGATE_NATS_NKEY_FILE",
    "EFFECTGATE_NATS_CREDS_FILE",
)
"""The variables that give a service its NATS identity as connect options; set to ``""`` they are unset."""


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


class FileSettings(BaseSettings):
    """Settings read from the environment, then ``effectgate.toml`` (:meth:`from_config`), then defaults."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_", extra="ignore", populate_by_name=True)

    config_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices(CONFIG_ENV),
        description="effectgate.toml: MCP servers, tool descriptor dirs and limits, chat, bus; environment variables "
        "override it. Env: EFFECTGATE_CONFIG.",
    )

    @classmethod
    def from_config(cls, config: EffectgateConfig) -> dict[str, Any]:
        """The settings this class takes from ``effectgate.toml``, by field name (none here)."""
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
        """Constructor values, then the environment, then ``effectgate.toml``, then the defaults."""
        return init_settings, env_settings, dotenv_settings, ConfigFileSource(settings_cls, init_settings)


class ServiceSettings(FileSettings):
    """Connection and identity settings shared by all services."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_", extra="ignore", populate_by_name=True)

    nats_url: str = Field(
        default="nats://127.0.0.1:4222",
        validation_alias=AliasChoices("NATS_URL"),
        description="NATS server URL, or a comma-separated list of the cluster's servers (JetStream enabled); "
        "credentials written in a URL are sent to every server. Env: NATS_URL.",
    )
    nats_user: str | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_USER"),
        description="NATS user name, sent to whichever server of NATS_URL the service connects to; with "
        "EFFECTGATE_NATS_PASSWORD or EFFECTGATE_NATS_PASSWORD_FILE. Env: EFFECTGATE_NATS_USER.",
    )
    nats_password: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_PASSWORD"),
        description="Password of EFFECTGATE_NATS_USER. Env: EFFECTGATE_NATS_PASSWORD.",
    )
    nats_password_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_PASSWORD_FILE"),
        description="File holding the password of EFFECTGATE_NATS_USER (one line). Env: EFFECTGATE_NATS_PASSWORD_FILE.",
    )
    nats_token: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_TOKEN"),
        description="NATS authentication token. Env: EFFECTGATE_NATS_TOKEN.",
    )
    nats_nkey_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_NKEY_FILE"),
        description="NKEY user seed file (SU…) the service signs the server's challenge with. "
        "Env: EFFECTGATE_NATS_NKEY_FILE.",
    )
    nats_creds_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_CREDS_FILE"),
        description="NATS .creds file (user JWT and NKEY seed). Env: EFFECTGATE_NATS_CREDS_FILE.",
    )
    nats_refused_exit_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias=AliasChoices("EFFECTGATE_NATS_REFUSED_EXIT_S"),
        description="Seconds the service keeps reconnecting while every answer is an authorization refusal; then "
        "it exits with code 1 (its supervisor restarts it). Env: EFFECTGATE_NATS_REFUSED_EXIT_S.",
    )
    nats_ca_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("EFFECTGATE_NATS_CA_FILE"),
        description="CA certificate (PEM) the NATS server's certificate is verified with; set: TLS from the "
        "first byte (the server needs tls { handshake_first: true }). Env: EFFECTGATE_NATS_CA_FILE.",
    )
    redis_url: Annotated[str, AfterValidator(checked_redis_url)] = Field(
        default="redis://127.0.0.1:6379/0",
        validation_alias=AliasChoices("REDIS_URL"),
        description="Redis URL for idempotency, rate limits, spend budgets and approvals: one server "
        "(redis://, rediss://, unix://) or a primary found through Sentinels "
        "(redis+sentinel://host:port[,host:port…]/<master name>[/<db>]). Env: REDIS_URL.",
    )
    keys_dir: Path = Field(
        default=Path("keys"),
        validation_alias=AliasChoices("EFFECTGATE_KEYS_DIR"),
        description="This service's own keys directory: its private key and the public keys it verifies "
        "(effectgate.shared.config.keyring). Env: EFFECTGATE_KEYS_DIR.",
    )
    redis_timeout_s: float = Field(
        default=0.5,
        validation_alias=AliasChoices("EFFECTGATE_REDIS_TIMEOUT_S"),
        description="Socket and connect timeout of every Redis call, seconds; a call on a broken connection "
        "is retried once, a call that timed out never. Env: EFFECTGATE_REDIS_TIMEOUT_S.",
    )
    fair_window: int = Field(
        default=4000,
        ge=0,
        le=FAIR_ACK_PENDING,
        validation_alias=AliasChoices("EFFECTGATE_FAIR_WINDOW"),
        description="Messages the policy's and the executor's request consumers fetch ahead, per replica, to "
        "start them principal by principal (docs/explanation/performance.md); 0: stream order, one "
        "principal's backlog delays everyone's. Env: EFFECTGATE_FAIR_WINDOW.",
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
        "Env: EFFECTGATE_<SERVICE>_HTTP_PORT.",
    )
    http_socket_fd: int | None = Field(
        default=None,
        ge=0,
        description="A listening TCP socket handed down by the process that started the service (`effectgate up`, "
        "the tests), served instead of binding http_host:http_port: its port can never be lost to another "
        "program. Env: EFFECTGATE_<SERVICE>_HTTP_SOCKET_FD.",
    )
    http_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address the health and metrics HTTP server listens on. Env: EFFECTGATE_<SERVICE>_HTTP_HOST.",
    )

    @field_validator(
        "nats_user", "nats_password", "nats_password_file", "nats_token", "nats_nkey_file", "nats_creds_file",
        mode="before",
    )  # fmt: skip
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """``""`` is no value (``effectgate up`` empties the ones a process must not inherit)."""
        return None if value == "" else value


class ConfigFileSource(PydanticBaseSettingsSource):
    """The values a :class:`FileSettings` class takes from ``effectgate.toml``.

    The file is the constructor's ``config_file``, else ``EFFECTGATE_CONFIG``; neither: no values.

    Raises:
        effectgate.shared.config.effectgate_file.ConfigInvalid: (when called) the file is unreadable or invalid.
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
        if config.path is None or not issubclass(self.settings_cls, FileSettings):
            return {}
        return self.settings_cls.from_config(config)
