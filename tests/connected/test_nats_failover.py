"""Connections that fail over: a service, and a command, on a secured 3-node nats-server cluster.

The cluster runs on loopback, each node with JetStream and the same users (with passwords,
and one NKEY user).
A service is given one node only; it learns the others from the cluster (nats-py's
discovered servers) and must reconnect to them as itself when its node dies: credentials
are connect options, never only in a URL, so they reach every server. ``/readyz`` says
``nats`` is not ready while no node serves it; a service whose credentials are refused
everywhere exits with code 1 instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import nkeys
import pytest
from nats.aio.client import Client

from effectgate.cli.client import rpc
from effectgate.cli.client.session import on_bus
from effectgate.contracts.bus import catalog
from effectgate.devstack.processes import end, spawn
from effectgate.devstack.servers import ServerProcess, free_port, nats_server
from effectgate.devstack.timing import scaled
from effectgate.sdk.connecting import connect_quietly

pytestmark = [pytest.mark.connected, pytest.mark.timing]

PASSWORDS = {"svc": "svc-secret", "client": "client-secret"}
SUBJECT = "failover.echo"

SERVICE = """
import sys
from faststream.nats import NatsMessage, NatsRouter
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.assembly import Lifecycle, new_app, new_broker, rpc, run_service
from effectgate.shared.runtime.health import monitoring

def create_app():
    settings = ServiceSettings()
    broker, router = new_broker("registry", settings), NatsRouter()

    @rpc(router, "failover.echo", "q")
    async def answer(msg: NatsMessage) -> bytes:
        return b"served"

    broker.include_router(router)

    async def build(js) -> None:
        return None

    return new_app(broker, build, Lifecycle(monitoring=monitoring("registry", settings)))

sys.exit(run_service("registry", create_app))
"""


def _users(passwords: dict[str, str], nkey: str) -> str:
    users = [f'{{user: "{user}", password: "{password}"}}' for user, password in passwords.items()]
    return f"authorization {{ users: [{', '.join([*users, f'{{nkey: {nkey}}}'])}] }}\n"


def _nkey_seed(path: Path) -> str:
    """Write a fresh NKEY user seed to ``path`` (mode 0600); return its public key (``U…``)."""
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    path.write_bytes(seed + b"\n")
    path.chmod(0o600)
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


class Cluster:
    """Three nats-server nodes routed to each other, each with its own users file (``users.conf``)."""

    def __init__(self, root: Path) -> None:
        self.root, self.routes = root, [free_port() for _ in range(3)]
        self.nodes: list[ServerProcess] = []
        root.mkdir(parents=True, exist_ok=True)
        self.seed_file = root / "svc.nk"
        self.nkey = _nkey_seed(self.seed_file)

    def config(self, index: int) -> Path:
        node = self.root / f"n{index}"
        node.mkdir(parents=True, exist_ok=True)
        routes = ", ".join(f"nats-route://127.0.0.1:{port}" for i, port in enumerate(self.routes) if i != index)
        cluster = f"cluster {{ name: eg, listen: 127.0.0.1:{self.routes[index]}, routes: [{routes}] }}\n"
        (node / "users.conf").write_text(_users(PASSWORDS, self.nkey))
        (node / "node.conf").write_text(f"server_name: n{index}\n{cluster}include users.conf\n")
        return node / "node.conf"

    def url(self, index: int, user: str | None = None) -> str:
        credentials = f"{user}:{PASSWORDS[user]}@" if user else ""
        return f"nats://{credentials}127.0.0.1:{self.nodes[index].ports['nats']}"

    def revoke(self, index: int, user: str) -> None:
        """Change ``user``'s password on node ``index`` and have it reload its configuration."""
        (self.root / f"n{index}" / "users.conf").write_text(_users({**PASSWORDS, user: "changed"}, self.nkey))
        self.nodes[index].process.send_signal(signal.SIGHUP)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path / "cluster")
    with contextlib.ExitStack() as stack:
        for index in range(3):
            made.nodes.append(stack.enter_context(nats_server(made.root / f"n{index}", made.config(index))))
        yield made


class Service:
    """The service process: request/reply on ``failover.echo``, ``/readyz`` on its own port."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.port, self.log = free_port(), work / "service.log"
        own = {"EFFECTGATE_HTTP_PORT": str(self.port), "EFFECTGATE_LOG_FORMAT": "text", **env}
        self.process = spawn([sys.executable, "-c", SERVICE], self.log, {**os.environ, **own})

    def readyz(self) -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except OSError:
            return 0, {}


def _env(cluster: Cluster, how: str) -> dict[str, str]:
    if how == "options":
        return {"NATS_URL": cluster.url(0), "EFFECTGATE_NATS_USER": "svc", "EFFECTGATE_NATS_PASSWORD": PASSWORDS["svc"]}
    if how == "nkey":
        return {"NATS_URL": cluster.url(0), "EFFECTGATE_NATS_NKEY_FILE": str(cluster.seed_file)}
    return {"NATS_URL": cluster.url(0, "svc")}


async def _until(check: object, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + scaled(timeout_s)
    while not await asyncio.to_thread(check):  # type: ignore[arg-type]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def _answered(client: Client, timeout_s: float = 20.0) -> bytes:
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        try:
            return (await client.request(SUBJECT, b"{}", timeout=0.5)).data
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _client(cluster: Cluster, *nodes: int) -> Client:
    servers = [cluster.url(index) for index in nodes]
    return await nats.connect(servers, user="client", password=PASSWORDS["client"], max_reconnect_attempts=-1)


def _ready(service: Service) -> bool:
    return service.readyz()[0] == 200


@pytest.mark.parametrize("how", ["options", "url", "nkey"])
async def test_a_service_reconnects_to_another_node_as_itself_and_says_when_it_is_not_connected(
    cluster: Cluster, tmp_path: Path, how: str
) -> None:
    service = Service(tmp_path, _env(cluster, how))
    client = await _client(cluster, 1, 2)
    try:
        await _until(lambda: _ready(service), "the service never became ready")
        assert await _answered(client) == b"served"
        cluster.nodes[0].kill()  # the only node the service was given
        assert await _answered(client) == b"served"  # it reconnected to node 1 or 2, as itself
        await _until(lambda: _ready(service), "the service did not say it is ready again")
        for node in cluster.nodes[1:]:
            node.kill()
        await _until(lambda: service.readyz()[0] == 503, "/readyz kept saying ready with no node up")
        reason = str(service.readyz()[1]["not_ready"]["nats"])  # type: ignore[index]
        assert reason.startswith("not connected to NATS: reconnecting"), reason
        cluster.nodes[2].restart()
        await _until(lambda: _ready(service), "the service did not come back with a node")
        assert await _answered(client) == b"served" and service.process.poll() is None
    finally:
        await client.close()
        end(service.process)
    assert "Authorization Violation" not in service.log.read_text()


@pytest.mark.parametrize("when", ["after-failover", "while-connected"])
async def test_a_service_whose_password_is_refused_everywhere_exits_instead_of_hanging(
    cluster: Cluster, tmp_path: Path, when: str
) -> None:
    env = {**_env(cluster, "options"), "EFFECTGATE_NATS_REFUSED_EXIT_S": "2"}
    service = Service(tmp_path, env)
    try:
        await _until(lambda: _ready(service), "the service never became ready")
        for index in (1, 2) if when == "after-failover" else (1, 2, 0):
            cluster.revoke(index, "svc")
        if when == "after-failover":
            await asyncio.sleep(1.0)  # the reloads
            cluster.nodes[0].kill()  # its reconnects reach only nodes that refuse it
        code = await asyncio.to_thread(service.process.wait, scaled(15))
    except subprocess.TimeoutExpired:
        code = None
    finally:
        end(service.process)
    said = service.log.read_text()
    critical = [line for line in said.splitlines() if "CRITICAL" in line]
    assert code == 1, said
    why = "refused this service's credentials for 2 s" if when == "after-failover" else "closed (nats: authorization"
    assert len(critical) == 1 and why in critical[0], said
    assert PASSWORDS["svc"] not in said and "Traceback" not in said, said


async def _ledger_bucket(cluster: Cluster) -> None:
    """The MCP surface's ledger bucket, made once the cluster's JetStream has a leader."""
    client = await _client(cluster, 1)
    try:
        deadline = time.monotonic() + scaled(20)
        while True:
            try:
                await client.jetstream().create_key_value(bucket=catalog.MCP_CALLS_BUCKET)
                return
            except nats.errors.Error:  # no JetStream leader yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
    finally:
        await client.close()


@pytest.mark.parametrize("when", ["after-failover", "while-connected"])
async def test_the_mcp_surface_refused_everywhere_exits_instead_of_hanging(
    cluster: Cluster, tmp_path: Path, when: str
) -> None:
    await _ledger_bucket(cluster)
    env = {**_env(cluster, "options"), "EFFECTGATE_NATS_REFUSED_EXIT_S": "2", "EFFECTGATE_LOG_FORMAT": "text"}
    env |= {"EFFECTGATE_SURFACE_OPEN_PRINCIPAL": "demo", "EFFECTGATE_SURFACE_PORT": str(free_port())}
    log = tmp_path / "surface.log"
    surface = spawn([sys.executable, "-m", "effectgate.surface"], log, {**os.environ, **env})
    try:
        await _until(lambda: "MCP surface on http" in log.read_text(), "the surface never served")
        for index in (1, 2) if when == "after-failover" else (1, 2, 0):
            cluster.revoke(index, "svc")
        if when == "after-failover":
            await asyncio.sleep(1.0)  # the reloads
            cluster.nodes[0].kill()
        code = await asyncio.to_thread(surface.wait, scaled(15))
    except subprocess.TimeoutExpired:
        code = None
    finally:
        end(surface)
    said = log.read_text()
    critical = [line for line in said.splitlines() if "CRITICAL" in line]
    why = "refused this service's credentials for 2 s" if when == "after-failover" else "closed (nats: authorization"
    assert code == 1 and len(critical) == 1 and why in critical[0], said
    assert PASSWORDS["svc"] not in said, said


async def test_a_command_given_a_server_list_connects_when_the_first_server_is_down(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(tmp_path / "no-stack"))
    monkeypatch.delenv("EFFECTGATE_CREDENTIALS", raising=False)
    cluster.nodes[0].kill()
    servers = f"{cluster.url(0)},{cluster.url(1, 'client')}"

    async def where(bus: rpc.Bus) -> str:
        return str(bus.nc.connected_url.port if bus.nc.connected_url else "")

    port = await asyncio.to_thread(on_bus, servers, where)
    assert port == str(cluster.nodes[1].ports["nats"])


async def test_an_agent_given_a_server_list_connects_when_the_first_server_is_down(cluster: Cluster) -> None:
    cluster.nodes[0].kill()
    servers = f"{cluster.url(0)},{cluster.url(1, 'client')}"  # the URL's credentials reach node 1 as options
    client = await connect_quietly(servers, _ignored)
    try:
        assert client.connected_url is not None and client.connected_url.port == cluster.nodes[1].ports["nats"]
    finally:
        await client.close()


async def _ignored(error: Exception) -> None:
    return None
