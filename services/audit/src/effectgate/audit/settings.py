"""Settings of the audit service (environment prefix ``EFFECTGATE_AUDIT_``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from effectgate.shared.config.settings import ServiceSettings

__all__ = ["AuditSettings"]


class AuditSettings(ServiceSettings):
    """Where the audit chain is kept."""

    model_config = SettingsConfigDict(env_prefix="EFFECTGATE_AUDIT_", extra="ignore")

    database: Path = Field(
        default=Path("audit.sqlite3"),
        description="SQLite file holding the hash-chained audit records. Env: EFFECTGATE_AUDIT_DATABASE.",
    )
