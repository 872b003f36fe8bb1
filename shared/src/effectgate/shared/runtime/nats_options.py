"""Where a NATS client connects and as whom: a list of servers, and credentials as connect options.

nats-py sends the credentials written in a URL only to that URL's own server: after a
failover to another server of the cluster the client would connect without them and be
refused. So ``NATS_URL`` may list every server (comma-separated), credentials come from
their own settings (user and password, token, NKEY seed, ``.creds``), and credentials
still written in a URL are lifted out of it into options, which nats-py sends to every server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faststream.nats import NatsCredentials, NatsNKey, NatsToken, NatsUserPassword
from faststream.nats.security import NatsSecurity

from effectgate.contracts.bus.nats_credentials import NatsUrlInvalid, lift_credentials, split_servers
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.connections import tls_options

__all__ = [
    "NatsAuth",
    "NatsSettingsInvalid",
    "broker_security",
    "client_options",
    "servers_and_auth",
]


class NatsSettingsInvalid(NatsUrlInvalid):
    """``NATS_URL`` or the NATS credentials settings cannot be used; the message names what is wrong."""


@dataclass(frozen=True)
class NatsAuth:
    """One identity on the bus; at most one kind is set (none: connect without credentials).

    Attributes:
        user / password: user and password (both or neither).
        token: an authentication token.
        nkey_file: an NKEY user seed file.
        creds_file: a ``.creds`` file (user JWT and NKEY seed).
    """

    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_file: Path | None = None
    creds_file: Path | None = None

    @property
    def kinds(self) -> list[str]:
        """The kinds of credentials set, by name."""
        given = {"user and password": self.user, "token": self.token, "NKEY": self.nkey_file}
        return [kind for kind, value in {**given, ".creds": self.creds_file}.items() if value]

    @property
    def name(self) -> str:
        """Who connects, for log lines (never a secret): the user, or the kind of credentials."""
        return self.user or (self.kinds[0] if self.kinds else "no credentials")


def _password(settings: ServiceSettings) -> str | None:
    if settings.nats_password is not None and settings.nats_password_file is not None:
        raise NatsSettingsInvalid("EFFECTGATE_NATS_PASSWORD and EFFECTGATE_NATS_PASSWORD_FILE are both set: set one")
    if settings.nats_password_file is None:
        return settings.nats_password.get_secret_value() if settings.nats_password else None
    try:
        return settings.nats_password_file.read_text().rstrip("\r\n")
    except OSError as error:
        raise NatsSettingsInvalid(
            f"EFFECTGATE_NATS_PASSWORD_FILE {settings.nats_password_file}: {error.strerror}"
        ) from None


def _settings_auth(settings: ServiceSettings) -> NatsAuth:
    password, token = _password(settings), settings.nats_token
    if (settings.nats_user is None) != (password is None):
        raise NatsSettingsInvalid("EFFECTGATE_NATS_USER and its password go together: set both or neither")
    for name, path in (("NKEY", settings.nats_nkey_file), ("CREDS", settings.nats_creds_file)):
        if path is not None and not path.is_file():
            raise NatsSettingsInvalid(f"EFFECTGATE_NATS_{name}_FILE {path}: no such file")
    return NatsAuth(
        settings.nats_user, password, token.get_secret_value() if token else None,
        settings.nats_nkey_file, settings.nats_creds_file,
    )  # fmt: skip


def servers_and_auth(settings: ServiceSettings) -> tuple[list[str], NatsAuth]:
    """The servers to connect to (without credentials) and the one identity to connect as.

    Raises:
        NatsSettingsInvalid: a bad server list; more than one kind of credentials set, or
            credentials both in ``NATS_URL`` and in their own settings; a user without a
            password (or the reverse); a password, NKEY or ``.creds`` file that cannot be read.
    """
    servers, lifted = lift_credentials(split_servers(settings.nats_url))
    in_url, given = NatsAuth(lifted.get("user"), lifted.get("password"), lifted.get("token")), _settings_auth(settings)
    if in_url.kinds and given.kinds:
        raise NatsSettingsInvalid("credentials both in NATS_URL and in EFFECTGATE_NATS_*: give them once")
    auth = given if given.kinds else in_url
    if len(auth.kinds) > 1:
        raise NatsSettingsInvalid(f"NATS credentials of several kinds are set ({', '.join(auth.kinds)}): set one")
    return servers, auth


def broker_security(auth: NatsAuth, ca_file: str | Path | None) -> NatsSecurity | None:
    """FastStream's ``security=`` for ``auth``, with TLS from the first byte when ``ca_file`` is set."""
    options = tls_options(ca_file)
    tls: dict[str, Any] = {"ssl_context": options["tls"], "tls_handshake_first": True} if options else {}
    if auth.user is not None and auth.password is not None:
        return NatsUserPassword(auth.user, auth.password, **tls)
    if auth.token is not None:
        return NatsToken(auth.token, **tls)
    if auth.nkey_file is not None:
        return NatsNKey.from_file(auth.nkey_file, **tls)
    if auth.creds_file is not None:
        return NatsCredentials.from_file(auth.creds_file, **tls)
    return NatsSecurity(**tls) if tls else None


def client_options(auth: NatsAuth) -> dict[str, Any]:
    """``nats.connect`` keyword arguments for ``auth`` (nats-py sends them to every server)."""
    if auth.user is not None:
        return {"user": auth.user, "password": auth.password}
    if auth.token is not None:
        return {"token": auth.token}
    if auth.nkey_file is not None:
        return {"nkeys_seed": str(auth.nkey_file)}
    return {"user_credentials": str(auth.creds_file)} if auth.creds_file is not None else {}
