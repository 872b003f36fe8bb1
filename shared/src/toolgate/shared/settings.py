"""Settings common to every service, read from the environment by pydantic-settings.

Each service subclasses :class:`ServiceSettings` with its own ``TOOLGATE_<SERVICE>_``
prefix; the connection URLs keep their conventional names ``NATS_URL`` and ``REDIS_URL``.
Settings are read only in a service's ``app.py``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServiceSettings"]


class ServiceSettings(BaseSettings):
    """Connection and identity settings shared by all services."""

    model_config = SettingsConfigDict(env_prefix="TOOLGATE_", extra="ignore")

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
    http_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address the health and metrics HTTP server listens on. Env: TOOLGATE_<SERVICE>_HTTP_HOST.",
    )
