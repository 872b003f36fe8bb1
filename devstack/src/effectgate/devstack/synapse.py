"""A local Synapse homeserver on a free loopback port, for the Matrix tests and a Matrix demo.

Synapse is AGPL-3.0, so it is never a dependency of effectgate and never imported here: it
lives in its own environment (``.tools/synapse``, made by ``./dev synapse``, which runs
``tests/fixtures/synapse/install.sh``) and runs as a separate process.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import urllib.error
import urllib.parse
import urllib.request
from base64 import b64encode
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.errors import Problem
from effectgate.devstack.processes import spawn
from effectgate.devstack.starting import ServerProcess, listens, ready_or_stopped, started_on_a_free_port

__all__ = [
    "INSTALL_HINT",
    "Homeserver",
    "MatrixUser",
    "SynapseMissing",
    "synapse_env",
    "synapse_server",
    "write_config",
]

INSTALL_HINT = "install it with ./dev synapse (tests/fixtures/synapse/install.sh), or set EFFECTGATE_SYNAPSE_ENV"
"""What to do when the Synapse environment is missing."""

_DEFAULT_ENV = Path(__file__).resolve().parents[4] / ".tools" / "synapse"
_GENEROUS = {"per_second": 1000, "burst_count": 10000}
_LIMITS = (
    "rc_message",
    "rc_registration",
    "rc_admin_redaction",
    "rc_joins_per_room",
    "rc_3pid_validation",
    "rc_third_party_invite",
    "rc_media_create",
    "rc_delayed_event_mgmt",
    "rc_room_creation",
    "rc_reports",
    "rc_user_directory",
    "rc_profile",
    "rc_key_requests",
)
_NESTED_LIMITS = {
    "rc_login": ("address", "account", "failed_attempts"),
    "rc_joins": ("local", "remote"),
    "rc_invites": ("per_room", "per_user", "per_issuer"),
    "rc_presence": ("per_user",),
}


class SynapseMissing(Problem, FileNotFoundError):
    """The separate Synapse environment is not installed."""


@dataclass(frozen=True)
class MatrixUser:
    """A registered user.

    Attributes:
        user_id: ``@name:server``.
        password: its password.
        access_token: a token of a device made at registration (for setup calls).
        device_id: that device.
    """

    user_id: str
    password: str
    access_token: str
    device_id: str


def synapse_env() -> Path:
    """The Synapse environment: ``$EFFECTGATE_SYNAPSE_ENV``, else ``.tools/synapse`` in the checkout.

    Raises:
        SynapseMissing: it has no ``synapse_homeserver`` executable.
    """
    env = Path(os.environ.get("EFFECTGATE_SYNAPSE_ENV") or _DEFAULT_ENV)
    if not (env / "bin" / "synapse_homeserver").is_file():
        raise SynapseMissing(f"Synapse is not installed in {env}: {INSTALL_HINT}")
    return env


class Homeserver:
    """A running Synapse: its URL, users and rooms; stopped and started again on the same port.

    Args:
        server: the homeserver process.
        url: ``http://127.0.0.1:<port>``.
        server_name: the part after ``:`` in user ids.
        shared_secret: the registration shared secret.
    """

    def __init__(self, server: ServerProcess, url: str, server_name: str, shared_secret: str) -> None:
        self.server, self.url, self.server_name = server, url, server_name
        self._secret = shared_secret

    def register(self, name: str, password: str | None = None, admin: bool = False) -> MatrixUser:
        """Register ``@name:server`` through the shared-secret admin API.

        Raises:
            urllib.error.HTTPError: Synapse refused (e.g. the user exists: ``M_USER_IN_USE``).
        """
        password = password or secrets.token_urlsafe(16)
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self._secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join(p.encode() for p in (nonce, name, password, "admin" if admin else "notadmin")))
        body = {"nonce": nonce, "username": name, "password": password, "admin": admin, "mac": mac.hexdigest()}
        answer = self.call("POST", "/_synapse/admin/v1/register", body)
        return MatrixUser(answer["user_id"], password, answer["access_token"], answer["device_id"])

    def create_room(self, owner: MatrixUser, members: Iterable[MatrixUser] = (), name: str = "approvals") -> str:
        """A private, unencrypted room of ``owner`` that every one of ``members`` has joined; its room id."""
        others = list(members)
        body = {"preset": "private_chat", "name": name, "invite": [m.user_id for m in others]}
        room_id = str(self.call("POST", "/_matrix/client/v3/createRoom", body, owner.access_token)["room_id"])
        for member in others:
            self.join(member, room_id)
        return room_id

    def join(self, user: MatrixUser, room_id: str) -> None:
        """``user`` joins ``room_id`` (invited, or a public room)."""
        self.call("POST", f"/_matrix/client/v3/join/{urllib.parse.quote(room_id)}", {}, user.access_token)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, token: str = "") -> dict[str, Any]:
        """One JSON request to the homeserver; the decoded answer.

        Raises:
            urllib.error.HTTPError: a 4xx/5xx answer (its note has Synapse's error).
            OSError: Synapse cannot be reached.
        """
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer: dict[str, Any] = json.loads(response.read() or b"{}")
                return answer
        except urllib.error.HTTPError as error:
            error.add_note(f"{method} {path}: {error.read().decode(errors='replace')[:500]}")
            raise

    def stop(self) -> None:
        """Stop Synapse (the data stays)."""
        self.server.stop()

    def start(self, timeout_s: float = 60.0) -> None:
        """Start Synapse again on the same port with the same data; return once it serves.

        Raises:
            RuntimeError / TimeoutError: it did not come up.
        """
        self.server.restart(timeout_s)

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.server.process.poll() is None


def _versions_answer(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/_matrix/client/versions", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _rate_limits() -> dict[str, Any]:
    limits: dict[str, Any] = dict.fromkeys(_LIMITS, _GENEROUS)
    limits |= {key: dict.fromkeys(parts, _GENEROUS) for key, parts in _NESTED_LIMITS.items()}
    return limits


def write_config(workdir: Path, port: int, server_name: str, shared_secret: str) -> Path:
    """Write ``homeserver.yaml`` (JSON is YAML) and a signing key under ``workdir``; the config's path."""
    key = Ed25519PrivateKey.generate().private_bytes_raw()
    (workdir / "signing.key").write_text(f"ed25519 a_tg {b64encode(key).decode().rstrip('=')}\n")
    config = {
        "server_name": server_name,
        "pid_file": str(workdir / "homeserver.pid"),
        "listeners": [
            {"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False, "x_forwarded": False}
            | {"resources": [{"names": ["client"], "compress": False}]}
        ],
        "database": {"name": "sqlite3", "args": {"database": str(workdir / "homeserver.db")}},
        "media_store_path": str(workdir / "media"),
        "signing_key_path": str(workdir / "signing.key"),
        "registration_shared_secret": shared_secret,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "report_stats": False,
        "enable_metrics": False,
        "presence": {"enabled": False},
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "enable_registration": False,
        **_rate_limits(),
    }
    path = workdir / "homeserver.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


@contextlib.contextmanager
def synapse_server(workdir: Path, server_name: str = "localhost", timeout_s: float = 60.0) -> Iterator[Homeserver]:
    """Run Synapse on a free loopback port with its data under ``workdir``; stop it on exit.

    Args:
        workdir: the config, SQLite database, media and ``synapse.log`` go here.
        server_name: the homeserver's name in user ids (``@bot:localhost``).
        timeout_s: how long to wait for ``/_matrix/client/versions`` to answer.

    Raises:
        SynapseMissing: the Synapse environment is not installed (says how to install it).
        RuntimeError / TimeoutError: Synapse did not come up.
    """
    env, shared_secret = synapse_env(), secrets.token_hex(16)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "synapse.log"

    def start(port: int) -> ServerProcess:
        config = write_config(workdir, port, server_name, shared_secret)
        url = f"http://127.0.0.1:{port}"
        proc = spawn([str(env / "bin" / "synapse_homeserver"), "--config-path", str(config)], log)
        server = ServerProcess(url, proc, log, lambda started: listens(started, port) and _versions_answer(url))
        ready_or_stopped(server, lambda: listens(proc, port) and _versions_answer(url), timeout_s)  # never another's
        return server

    server = started_on_a_free_port(start, attempts=3)
    try:
        yield Homeserver(server, server.url, server_name, shared_secret)
    finally:
        server.stop()
