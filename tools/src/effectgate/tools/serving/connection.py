"""How a worker connects: as NATS user ``worker-<name>``, with the services' connect settings.

The same variables as the services (``NATS_URL`` a server or a comma-separated list;
``EFFECTGATE_NATS_USER`` + ``_PASSWORD`` / ``_PASSWORD_FILE``, ``_TOKEN``, ``_NKEY_FILE``,
``_CREDS_FILE``; ``EFFECTGATE_NATS_CA_FILE``), read by pydantic-settings. Credentials in a URL
are lifted into options so they reach every server of a cluster
(:func:`effectgate.contracts.bus.nats_credentials.connect_arguments`); once connected the
worker reconnects for as long as it runs. This package does not depend on ``effectgate-shared``
(the services' runtime: FastStream, Redis, OpenTelemetry), so a tool team's image stays small.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from effectgate.contracts.bus.nats_credentials import NatsUrlInvalid, connect_arguments, redact, rotated
from effectgate.contracts.bus.nats_permissions import private_inbox, worker_user
from effectgate.contracts.errors import described
from effectgate.tools.serving.errors import WorkerRefused

__all__ = ["WorkerSettings", "connect_worker", "identity_options"]

log = logging.getLogger("effectgate.tools.worker")


def _env(name: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(name), description=f"Env: {name}.")


class WorkerSettings(BaseSettings):
    """A worker's settings from the environment (each documented by its variable)."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    nats_url: str = Field(default="nats://127.0.0.1:4222", validation_alias=AliasChoices("NATS_URL"))
    nats_user: str | None = _env("EFFECTGATE_NATS_USER")
    nats_password: SecretStr | None = _env("EFFECTGATE_NATS_PASSWORD")
    nats_password_file: Path | None = _env("EFFECTGATE_NATS_PASSWORD_FILE")
    nats_token: SecretStr | None = _env("EFFECTGATE_NATS_TOKEN")
    nats_nkey_file: Path | None = _env("EFFECTGATE_NATS_NKEY_FILE")
    nats_creds_file: Path | None = _env("EFFECTGATE_NATS_CREDS_FILE")
    nats_ca_file: Path | None = _env("EFFECTGATE_NATS_CA_FILE")
    public_keys_dir: Path | None = _env("EFFECTGATE_PUBLIC_KEYS_DIR")
    max_concurrent: int = Field(default=16, ge=1, validation_alias=AliasChoices("EFFECTGATE_WORKER_MAX_CONCURRENT"))
    grace_s: float = Field(default=30.0, ge=0, validation_alias=AliasChoices("EFFECTGATE_WORKER_GRACE_S"))
    connect_s: float = Field(default=30.0, gt=0, validation_alias=AliasChoices("EFFECTGATE_WORKER_CONNECT_S"))

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value


def _password(settings: WorkerSettings) -> str | None:
    if settings.nats_password is not None and settings.nats_password_file is not None:
        raise WorkerRefused("EFFECTGATE_NATS_PASSWORD and EFFECTGATE_NATS_PASSWORD_FILE are both set: set one")
    if settings.nats_password_file is None:
        return settings.nats_password.get_secret_value() if settings.nats_password else None
    try:
        return settings.nats_password_file.read_text().rstrip("\r\n")
    except OSError as error:
        raise WorkerRefused(f"EFFECTGATE_NATS_PASSWORD_FILE {settings.nats_password_file}: {error.strerror}") from None


def identity_options(settings: WorkerSettings, name: str) -> dict[str, Any]:
    """``nats.connect`` options of worker ``name``'s identity: its credentials, inbox and TLS.

    Raises:
        WorkerRefused: several kinds of credentials, a user without a password, a user that is
            not ``worker-<name>``, or a file that cannot be read.
    """
    password = _password(settings)
    options: dict[str, Any] = {"inbox_prefix": private_inbox(worker_user(name)).encode()}
    if (settings.nats_user is None) != (password is None):
        raise WorkerRefused("EFFECTGATE_NATS_USER and its password go together: set both or neither")
    if settings.nats_user is not None and settings.nats_user != worker_user(name):
        raise WorkerRefused(f"EFFECTGATE_NATS_USER is {settings.nats_user}, not {worker_user(name)}")
    given = {
        "user": {"user": settings.nats_user, "password": password} if settings.nats_user else None,
        "token": {"token": settings.nats_token.get_secret_value()} if settings.nats_token else None,
        "nkey": {"nkeys_seed": str(settings.nats_nkey_file)} if settings.nats_nkey_file else None,
        "creds": {"user_credentials": str(settings.nats_creds_file)} if settings.nats_creds_file else None,
    }
    kinds = [kind for kind, value in given.items() if value]
    if len(kinds) > 1:
        raise WorkerRefused(f"NATS credentials of several kinds are set ({', '.join(kinds)}): set one")
    for kind in kinds:
        options |= given[kind] or {}
    return options | _tls(settings.nats_ca_file)


def _tls(ca_file: Path | None) -> dict[str, Any]:
    """TLS from the first byte with a server certificate ``ca_file`` signed (as the services connect)."""
    if ca_file is None:
        return {}
    try:
        return {"tls": ssl.create_default_context(cafile=str(ca_file)), "tls_handshake_first": True}
    except (OSError, ssl.SSLError) as error:
        raise WorkerRefused(f"EFFECTGATE_NATS_CA_FILE {ca_file}: {described(error)}") from None


async def connect_worker(settings: WorkerSettings, name: str, delay_s: float = 1.0) -> Client:
    """Worker ``name``'s connection: retried until ``settings.connect_s``, then reconnecting forever.

    Raises:
        WorkerRefused: bad settings (:func:`identity_options`), a malformed ``NATS_URL``, the
            credentials refused by the server (at once), or no server reached in time.
    """
    try:
        servers, options = connect_arguments(settings.nats_url, identity_options(settings, name))
    except NatsUrlInvalid as error:
        raise WorkerRefused(str(error)) from None
    deadline, attempt, last = asyncio.get_running_loop().time() + settings.connect_s, 0, ""
    connected = asyncio.Event()

    async def heard(error: Exception) -> None:
        if connected.is_set():  # before: each failed attempt, said once at the end if none connects
            log.warning("NATS connection: %s", described(error))

    while asyncio.get_running_loop().time() < deadline:
        try:
            nc = await nats.connect(
                rotated(servers, attempt), allow_reconnect=False, connect_timeout=2, dont_randomize=True,
                max_reconnect_attempts=1, name=worker_user(name), error_cb=heard, **options,
            )  # fmt: skip
        except (TimeoutError, OSError, nats.errors.Error) as error:
            if "authorization violation" in str(error).lower():
                raise WorkerRefused(f"NATS refused the credentials of {worker_user(name)}") from None
            attempt, last = attempt + 1, described(error)
            await asyncio.sleep(delay_s)
            continue
        nc.options.update({"allow_reconnect": True, "max_reconnect_attempts": -1, "reconnect_time_wait": 1.0})
        connected.set()
        return nc
    raise WorkerRefused(redact(f"cannot reach NATS at {settings.nats_url} in {settings.connect_s:g} s: {last}"))
