"""A revocation pushed to one node of a 3-node cluster reaches the others: the agent on another node is refused.

Each node runs the operator, system account and ``full`` resolver of ``effectgate nats-jwt init``
with a JWT store of its own; the account update is published on node 0 only, and the
resolvers of nodes 1 and 2 take it from the system account's traffic across the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from effectgate.cli.commands.nats_jwt_files import Layout
from effectgate.contracts.bus.catalog import Rpc
from effectgate.devstack.servers import ServerProcess, free_port, nats_server
from effectgate.shared.config.nats_jwt.claims import SYSTEM_ACCOUNT
from effectgate.shared.config.nats_jwt.encoding import public_key
from effectgate.shared.config.nats_jwt.server import server_config
from tests.connected.nats_jwt_support import AGENT, OTHER, REVOKED_WITHIN_S, connect_as, init, revoke, serve_listings
from tests.deploy.test_nats_permissions import WAIT_S

pytestmark = [pytest.mark.connected, pytest.mark.timing]


def _node_config(out: Path, index: int, routes: list[int], store: Path) -> Path:
    """``out/node-<index>.conf``: the node's name and routes, then the operator lines with its own JWT store."""
    others = ", ".join(f"nats-route://127.0.0.1:{port}" for i, port in enumerate(routes) if i != index)
    cluster = f"server_name: n{index}\ncluster {{ name: eg, listen: 127.0.0.1:{routes[index]}, routes: [{others}] }}\n"
    system = public_key(Layout(out).seed("account", SYSTEM_ACCOUNT).read_bytes())
    path = out / f"node-{index}.conf"  # beside preload.conf, which it includes
    path.write_text(cluster + server_config((out / "operator.jwt").read_text().strip(), system, str(store)))
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, list[ServerProcess]]]:
    out, routes = init(tmp_path / "jwt", tmp_path / "unused"), [free_port() for _ in range(3)]
    with contextlib.ExitStack() as stack:
        nodes = [
            stack.enter_context(
                nats_server(tmp_path / f"n{i}", _node_config(out, i, routes, tmp_path / f"n{i}" / "jwt"))
            )
            for i in range(3)
        ]
        yield out, nodes


async def test_a_revocation_through_node_0_refuses_the_agent_on_node_2(
    cluster: tuple[Path, list[ServerProcess]],
) -> None:
    out, nodes = cluster
    closed = asyncio.Event()
    policy = await connect_as(nodes[0].url, out, "policy")
    await serve_listings(policy, "demo-agent", "other-agent")
    agent, other = await connect_as(nodes[2].url, out, AGENT, closed), await connect_as(nodes[2].url, out, OTHER)
    await agent.nc.request(Rpc.tools_list("demo-agent"), b"{}", timeout=WAIT_S)  # served across the cluster
    started = time.monotonic()
    done = await revoke(out, AGENT, nodes[0].url)
    assert done.exit_code == 0, done.output
    await asyncio.wait_for(closed.wait(), REVOKED_WITHIN_S)
    assert time.monotonic() - started < REVOKED_WITHIN_S  # from the command's start, on another node
    assert "user authentication revoked" in str(agent.nc.last_error).lower()
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await connect_as(nodes[2].url, out, AGENT)
    assert (await other.nc.request(Rpc.tools_list("other-agent"), b"{}", timeout=WAIT_S)).data == b"{}"
    for conn in (policy, other):
        await conn.nc.close()
