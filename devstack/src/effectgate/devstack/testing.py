"""Pytest plugin: real NATS (JetStream) and Redis for connected tests."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nats
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from nats.aio.client import Client
from nats.js import JetStreamContext

from effectgate.devstack.cluster import NatsCluster, nats_cluster
from effectgate.devstack.sentinels import SentinelGroup, sentinel_group
from effectgate.devstack.servers import ServerProcess, nats_server, redis_server
from effectgate.shared.stores.provision import ensure_bus

MODE = os.environ.get("EFFECTGATE_TEST_SERVERS", "embedded")


def _containers(stack: ExitStack) -> tuple[str, str]:
    from testcontainers.community.nats import NatsContainer
    from testcontainers.community.redis import RedisContainer

    nats_c = stack.enter_context(NatsContainer(image="nats:2.10", jetstream=True))
    redis_c = stack.enter_context(RedisContainer(image="redis:7"))
    host, port = redis_c.get_container_host_ip(), redis_c.get_exposed_port(6379)
    return nats_c.nats_uri(), f"redis://{host}:{port}/0"


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess | str]]:
    """Session servers: ``{"nats": ServerProcess|url, "redis": ServerProcess|url}``."""
    with ExitStack() as stack:
        if MODE == "external":
            yield {"nats": os.environ["NATS_URL"], "redis": os.environ["REDIS_URL"]}
        elif MODE == "testcontainers":
            nats_url, redis_url = _containers(stack)
            yield {"nats": nats_url, "redis": redis_url}
        else:
            root = tmp_path_factory.mktemp("servers")
            yield {
                "nats": stack.enter_context(nats_server(root / "nats")),
                "redis": stack.enter_context(redis_server(root / "redis")),
            }


def _url(server: ServerProcess | str) -> str:
    return server if isinstance(server, str) else server.url


@pytest.fixture(scope="session")
def nats_url(servers: dict[str, ServerProcess | str]) -> str:
    """URL of the session's NATS server."""
    return _url(servers["nats"])


@pytest.fixture(scope="session")
def redis_url(servers: dict[str, ServerProcess | str]) -> str:
    """URL of the session's Redis server."""
    return _url(servers["redis"])


@pytest.fixture
def ns() -> str:
    """A unique token for names in tests sharing one server."""
    return "t" + uuid.uuid4().hex[:10]


@pytest_asyncio.fixture(scope="session")
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio Redis client on the session server."""
    client = aioredis.Redis.from_url(redis_url, socket_timeout=2)
    yield client
    await client.aclose()


@pytest_asyncio.fixture(scope="session")
async def nc(nats_url: str) -> AsyncIterator[Client]:
    """A nats-py connection to the session server."""
    client = await nats.connect(nats_url)
    yield client
    await client.close()


@pytest_asyncio.fixture(scope="session")
async def js(nc: Client) -> JetStreamContext:
    """JetStream context with the effectgate stream, consumers and bucket provisioned."""
    jetstream = nc.jetstream()
    await ensure_bus(jetstream)
    return jetstream


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    """A fresh 3-node NATS cluster with JetStream (:func:`~effectgate.devstack.cluster.nats_cluster`), then stopped.

    Nothing is provisioned on it: a test starts from an empty cluster (and may kill, stop and restart nodes).
    """
    with nats_cluster(tmp_path / "cluster") as started:
        yield started


@pytest.fixture(scope="session")
def repo_root(pytestconfig: pytest.Config) -> Path:
    """The repository checkout (pytest's rootdir)."""
    return Path(pytestconfig.rootpath)


@dataclass
class RemoteDocuments:
    """Serves the schema ``{}`` (accepts anything) at every path and records each request.

    Attributes:
        base: ``http://127.0.0.1:<port>``.
        hits: the path of every request received, in order.
    """

    base: str
    hits: list[str] = field(default_factory=list)


@pytest.fixture
def remote() -> Iterator[RemoteDocuments]:
    """A :class:`RemoteDocuments` on a free loopback port, stopped after the test."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield RemoteDocuments(f"http://127.0.0.1:{server.server_address[1]}", hits)
    server.shutdown()
    server.server_close()
    thread.join()


_BUS_FIXTURES = frozenset({"servers", "nats_url", "stack", "synapse", "cluster"})
_BUS_FOLDERS = ("tests/connected/", "tests/deploy/", "tests/e2e/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that talks to a real server ``connected``, so a run can pick them alone.

    A test is connected when it uses a fixture that starts servers (``servers``, ``nats_url``,
    ``stack``, ``synapse``, ``cluster``) or lives in a folder of such tests; CI runs these again on another
    nats-server release (``.ci/run``) without repeating the pure unit tests.
    """
    root = str(config.rootpath) + "/"
    for item in items:
        where = str(item.path).removeprefix(root)
        if _BUS_FIXTURES & set(getattr(item, "fixturenames", ())) or where.startswith(_BUS_FOLDERS):
            item.add_marker(pytest.mark.connected)


@pytest.fixture
def redis_sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    """A primary, a replica and three Sentinels (:func:`~effectgate.devstack.sentinels.sentinel_group`)."""
    with sentinel_group(tmp_path / "sentinels") as group:
        yield group


SUMMARY_PROPERTY = "summary"
"""A test's ``record_property`` name for lines the run prints at its end (also from xdist workers)."""

_SUMMARIES: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Keep the :data:`SUMMARY_PROPERTY` lines of each test's call (reports reach the controller under xdist)."""
    if report.when == "call":
        _SUMMARIES.extend(str(value) for name, value in report.user_properties if name == SUMMARY_PROPERTY)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the kept summaries (the chaos test's counts, for one) after the run's own."""
    for summary in _SUMMARIES:
        terminalreporter.write_line(summary)
