"""docker-compose.yml's cluster profile: three NATS nodes, Redis with Sentinel, two replicas of shared work.

Offline: the compose file is read as compose would with deploy/compose/cluster.env (its ``${NAME:-default}``
values resolved), and without it, where the single-node stack stays what it was.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy.settings_env import ROOT

RAW: dict[str, dict[str, Any]] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
CLUSTER_ENV = dict(
    line.split("=", 1)
    for line in (ROOT / "deploy" / "compose" / "cluster.env").read_text().splitlines()
    if line and not line.startswith("#")
)
CLUSTER_CONF = (ROOT / "deploy" / "nats" / "nats-cluster.conf").read_text()
SHARE_WORK = {"policy", "approvals", "executor"}


def resolve(value: Any, env: dict[str, str]) -> Any:
    """``value`` with each ``${NAME:-default}`` replaced as compose would with ``env`` (recursively)."""
    if isinstance(value, str):
        return re.sub(r"\$\{([A-Z_]+):-([^}]*)\}", lambda m: env.get(m[1], m[2]), value)
    if isinstance(value, list):
        return [resolve(item, env) for item in value]
    if isinstance(value, dict):
        return {key: resolve(item, env) for key, item in value.items()}
    return value


def active(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The services compose starts with ``env``: those of no profile and of the profiles it names."""
    profiles = set(filter(None, env.get("COMPOSE_PROFILES", "").split(",")))
    return {
        name: resolve(service, env)
        for name, service in RAW.items()
        if not service.get("profiles") or profiles & set(service["profiles"])
    }


CLUSTER, SINGLE = active(CLUSTER_ENV), active({})


def names_of(service_name: str, service: dict[str, Any]) -> set[str]:
    """The names a service answers to on the default network."""
    aliases = ((service.get("networks") or {}).get("default") or {}).get("aliases", [])
    return {service_name, *aliases}


def nats_nodes(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items() if str(s.get("image", "")).startswith("nats:")}


def config_of(service: dict[str, Any]) -> str:
    return Path(service["command"][service["command"].index("-c") + 1]).name


SWITCHES = {
    "EFFECTGATE_NATS_CONFIG": ("nats-tls.conf", "nats-cluster.conf"),
    "EFFECTGATE_NATS_CLUSTER_ALIAS": (None, "nats"),
    "EFFECTGATE_REDIS_URL": ("redis://redis:6379/0", None),
    "EFFECTGATE_SHARED_REPLICAS": ("1", "2"),
}
"""Compose variable → (its default in docker-compose.yml, its value in cluster.env); ``None``: checked elsewhere.
The table of docs/how-to/deploy-with-compose.md."""


def test_the_cluster_env_names_the_profile_and_only_variables_compose_reads() -> None:
    assert CLUSTER_ENV["COMPOSE_PROFILES"] == "cluster"
    assert set(CLUSTER_ENV) - {"COMPOSE_PROFILES"} == set(SWITCHES)


@pytest.mark.parametrize("variable", sorted(SWITCHES))
def test_each_switch_defaults_to_the_single_node_stack(variable: str) -> None:
    default, clustered = SWITCHES[variable]
    found = set(re.findall(rf"\$\{{{variable}:-([^}}]*)\}}", (ROOT / "docker-compose.yml").read_text()))
    assert found, f"docker-compose.yml does not read {variable}"
    assert default is None or found == {default}
    assert clustered is None or CLUSTER_ENV[variable] == clustered


def test_without_the_profile_nats_is_one_node_with_the_tls_config() -> None:
    (node,) = nats_nodes(SINGLE).values()
    assert config_of(node) == "nats-tls.conf"
    assert not any("nats" in names_of(n, s) for n, s in RAW.items() if s.get("profiles")), "no node is `nats`"
    assert all("deploy" not in s or s["deploy"]["replicas"] == "1" for s in SINGLE.values())


def test_the_cluster_is_three_jetstream_nodes_with_the_cluster_config_and_their_own_volumes() -> None:
    nodes = nats_nodes(CLUSTER)
    assert len(nodes) == 3
    assert {config_of(s) for s in nodes.values()} == {"nats-cluster.conf"}
    assert all("-js" in s["command"] for s in nodes.values())
    data = [next(v.split(":")[0] for v in s["volumes"] if v.split(":")[1] == "/data") for s in nodes.values()]
    assert len(set(data)) == 3, data
    assert len({s["environment"]["NATS_SERVER_NAME"] for s in nodes.values()}) == 3


def test_each_node_routes_to_every_node_and_answers_to_nats() -> None:
    nodes = nats_nodes(CLUSTER)
    every_name = [names_of(name, s) for name, s in nodes.items()]
    assert all("nats" in names for names in every_name), "the services dial `nats`"
    for service in nodes.values():
        routes = [urlsplit(service["environment"][f"NATS_ROUTE_{i}"]) for i in (1, 2, 3)]
        hosts = [route.hostname for route in routes]
        assert all(sum(host in names for host in hosts) == 1 for names in every_name), hosts
        assert {(route.username, route.port) for route in routes} == {("route", 6222)}


def test_the_cluster_config_reads_its_node_and_refuses_routes_without_the_password() -> None:
    assert re.search(r'^include "nats-tls.conf"$', CLUSTER_CONF, re.M)
    assert re.search(r"^server_name: \$NATS_SERVER_NAME$", CLUSTER_CONF, re.M)
    assert re.search(r"routes: \[\$NATS_ROUTE_1, \$NATS_ROUTE_2, \$NATS_ROUTE_3\]", CLUSTER_CONF)
    assert re.search(r"authorization \{\s*user: route\s*password: \$NATS_ROUTE_PASSWORD", CLUSTER_CONF)
    for service in nats_nodes(CLUSTER).values():
        # no default: an unset password leaves the variable unset, and nats-server does not start
        assert service["environment"]["NATS_ROUTE_PASSWORD"] is None
        assert "6222" not in str(service.get("ports", [])), "routes are never published on the host"


def sentinels() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in CLUSTER.items() if "--sentinel" in " ".join(map(str, s.get("command", [])))}


def test_redis_has_a_replica_and_three_sentinels_with_a_quorum_of_two() -> None:
    assert CLUSTER["redis-replica"]["command"][-3:] == ["--replicaof", "redis", "6379"]
    assert "--appendfsync" in CLUSTER["redis-replica"]["command"]
    assert len(sentinels()) == 3
    assert len({s["hostname"] for s in sentinels().values()}) == 3
    for sentinel in sentinels().values():
        assert "sentinel monitor mymaster redis 6379 2" in sentinel["command"][-1]


def test_the_services_follow_redis_through_every_sentinel() -> None:
    urls = {s["environment"]["REDIS_URL"] for s in CLUSTER.values() if "REDIS_URL" in s.get("environment", {})}
    (url,) = urls
    hosts = url.removeprefix("redis+sentinel://").split("/")[0].split(",")
    assert sorted(hosts) == sorted(f"{s['hostname']}:26379" for s in sentinels().values())
    assert url.endswith("/mymaster/0")
    assert {s["environment"]["REDIS_URL"] for s in SINGLE.values() if "REDIS_URL" in s.get("environment", {})} == {
        "redis://redis:6379/0"
    }


@pytest.mark.parametrize("service", sorted(SHARE_WORK))
def test_services_that_share_work_run_twice(service: str) -> None:
    assert CLUSTER[service]["deploy"]["replicas"] == "2"


def test_only_services_that_share_work_are_replicated() -> None:
    assert {name for name, s in CLUSTER.items() if "deploy" in s} == SHARE_WORK


@pytest.mark.parametrize("profile", ["single", "cluster"])
def test_every_dependency_is_started_by_the_same_profile(profile: str) -> None:
    services = CLUSTER if profile == "cluster" else SINGLE
    for name, service in services.items():
        missing = set(service.get("depends_on") or {}) - set(services)
        assert not missing, (name, missing)
