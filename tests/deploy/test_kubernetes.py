"""deploy/kubernetes is valid Kubernetes, complete, and its NATS and Redis are the clusters it claims.

Offline: every object of every resource file the kustomization lists is validated against the
Kubernetes schemas bundled in kubernetes-validate (strict: no unknown field); nothing is applied to a
cluster. The services' own manifests are checked in tests/deploy/test_kubernetes_services.py.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest

from tests.deploy.manifests import (
    KUBERNETES,
    KUSTOMIZATION,
    Object,
    container,
    env,
    generated_config_maps,
    mounts,
    objects,
    of_kind,
    pod_spec,
    resource_files,
)
from tests.deploy.settings_env import ROOT

KUBERNETES_VERSION = "1.31.0"
"""The oldest Kubernetes the manifests are validated for (policy/v1, seccompProfile, sizeLimit)."""
COPIES = {
    KUBERNETES / "nats" / "nats.conf": ROOT / "deploy" / "nats" / "nats.conf",
    **{KUBERNETES / "config" / "policy" / p.name: p for p in (ROOT / "deploy" / "policy").iterdir()},
    **{KUBERNETES / "config" / "tools" / p.name: p for p in (ROOT / "deploy" / "tools").iterdir()},
}


def object_id(obj: Object) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def test_the_kustomization_lists_every_manifest_and_only_existing_ones() -> None:
    on_disk = {p for p in KUBERNETES.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert set(resource_files()) == on_disk
    assert len(resource_files()) == len(set(resource_files())), "a resource is listed twice"


def test_every_generated_config_map_file_exists() -> None:
    files = [path for paths in generated_config_maps().values() for path in paths]
    assert files and all(path.is_file() for path in files), [p for p in files if not p.is_file()]


@pytest.mark.parametrize("copy", sorted(COPIES), ids=lambda p: str(p.relative_to(KUBERNETES)))
def test_config_copies_are_the_committed_files(copy: Any) -> None:
    """kustomize reads no file outside its directory: the copies must stay the files compose mounts."""
    assert copy.read_bytes() == COPIES[copy].read_bytes(), f"copy {COPIES[copy]} to {copy}"


def test_every_policy_and_tools_file_is_in_a_generated_config_map() -> None:
    generated = {path for paths in generated_config_maps().values() for path in paths}
    assert set(COPIES) <= generated, set(COPIES) - generated


@pytest.mark.parametrize("obj", objects(), ids=object_id)
def test_each_object_is_valid_kubernetes(obj: Object) -> None:
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_validator_refuses_an_unknown_field() -> None:
    broken = {**of_kind("Service")["nats"], "spec": {**of_kind("Service")["nats"]["spec"], "clusterIp": "None"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_names_are_unique_per_kind() -> None:
    ids = [object_id(obj) for obj in objects()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_everything_lives_in_the_namespace() -> None:
    assert KUSTOMIZATION["namespace"] in of_kind("Namespace")
    assert all("namespace" not in obj["metadata"] for obj in objects()), "the kustomization sets it"


def workloads() -> list[Object]:
    return [*of_kind("Deployment").values(), *of_kind("StatefulSet").values()]


@pytest.mark.parametrize("workload", workloads(), ids=object_id)
def test_each_workload_runs_unprivileged_with_resources(workload: Object) -> None:
    pod, box = pod_spec(workload)["securityContext"], container(workload)["securityContext"]
    assert pod["runAsNonRoot"] is True and pod["runAsUser"] > 0
    assert pod["seccompProfile"]["type"] == "RuntimeDefault"
    assert box["allowPrivilegeEscalation"] is False and box["readOnlyRootFilesystem"] is True
    assert box["capabilities"]["drop"] == ["ALL"]
    resources = container(workload)["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and "memory" in resources["limits"]


@pytest.mark.parametrize("workload", workloads(), ids=object_id)
def test_each_config_map_a_workload_mounts_is_generated_or_made_by_the_operator(workload: Object) -> None:
    made_by_the_operator = {"nats-ca"}  # the CA certificate, public, from `effectgate tls generate`
    names = {v["configMap"]["name"] for v in mounts(workload).values() if "configMap" in v}
    assert names <= set(generated_config_maps()) | made_by_the_operator


# --- NATS ----------------------------------------------------------------------------------------

NATS = of_kind("StatefulSet")["nats"]
NATS_CONF = (KUBERNETES / "nats" / "nats-cluster.conf").read_text()


def nats_pods() -> list[str]:
    return [f"nats-{i}.{NATS['spec']['serviceName']}" for i in range(NATS["spec"]["replicas"])]


def test_nats_is_three_nodes_behind_a_headless_service() -> None:
    assert NATS["spec"]["replicas"] == 3
    headless = of_kind("Service")[NATS["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    assert {p["port"] for p in headless["spec"]["ports"]} >= {4222, 6222}


def test_each_nats_node_routes_to_every_node_under_its_own_name() -> None:
    args = container(NATS)["args"]
    routes = next(a for a in args if a.startswith("--routes=")).removeprefix("--routes=").split(",")
    assert [urlsplit(route).hostname for route in routes] == nats_pods()
    assert {urlsplit(route).port for route in routes} == {6222}
    assert "--name=$(POD_NAME)" in args
    assert env(NATS) == {} and container(NATS)["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_nats_runs_jetstream_on_its_own_volume_with_the_generated_users_over_tls() -> None:
    args = container(NATS)["args"]
    assert "--jetstream" in args and not re.search(r"^jetstream", NATS_CONF, re.M), "nats.conf's limits stay"
    store = next(a for a in args if a.startswith("--store_dir=")).removeprefix("--store_dir=")
    assert mounts(NATS)[store]["name"] == "data"
    assert [t["metadata"]["name"] for t in NATS["spec"]["volumeClaimTemplates"]] == ["data"]
    assert re.search(r'^include "nats.conf"$', NATS_CONF, re.M)
    assert re.search(r"^tls\s*\{[^}]*handshake_first:\s*true", NATS_CONF, re.M)
    assert mounts(NATS)["/etc/nats"]["configMap"]["name"] == "nats-config"
    assert mounts(NATS)["/etc/nats/tls"]["secret"]["secretName"] == "nats-tls"
    assert "--config=/etc/nats/nats-cluster.conf" in container(NATS)["args"]


def test_nats_gets_every_password_from_its_secret() -> None:
    used = set(re.findall(r"\$([A-Z_][A-Z0-9_]*)", (KUBERNETES / "nats" / "nats.conf").read_text() + NATS_CONF))
    assert "NATS_ROUTE_PASSWORD" in used and "NATS_POLICY_PASSWORD" in used
    assert container(NATS)["envFrom"] == [{"secretRef": {"name": "nats-passwords"}}]


def test_nats_nodes_are_drained_one_at_a_time() -> None:
    budget = of_kind("PodDisruptionBudget")["nats"]["spec"]
    assert budget["maxUnavailable"] == 1 and budget["selector"] == NATS["spec"]["selector"]


# --- Redis ---------------------------------------------------------------------------------------

REDIS, SENTINEL = of_kind("StatefulSet")["redis"], of_kind("StatefulSet")["redis-sentinel"]
SENTINEL_SCRIPT = (KUBERNETES / "redis" / "sentinel-start.sh").read_text()


def test_redis_is_a_primary_and_a_replica_watched_by_three_sentinels() -> None:
    assert REDIS["spec"]["replicas"] == 2 and SENTINEL["spec"]["replicas"] == 3
    monitor = re.search(r"sentinel monitor (\S+) redis-0\.(\S+) 6379 (\d+)", SENTINEL_SCRIPT)
    assert monitor and monitor[2] == REDIS["spec"]["serviceName"] and int(monitor[3]) == 2, "a quorum of 2 of 3"
    assert of_kind("Service")[REDIS["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"


def test_redis_syncs_every_write_and_keeps_it_on_its_volume() -> None:
    script = (KUBERNETES / "redis" / "redis-start.sh").read_text()
    assert "--appendonly yes --appendfsync always" in script and "--dir /data" in script
    assert mounts(REDIS)["/data"]["name"] == "data" and mounts(SENTINEL)["/data"]["name"] == "data"


def test_the_services_reach_redis_through_every_sentinel() -> None:
    sentinels = [f"redis-sentinel-{i}.{SENTINEL['spec']['serviceName']}:26379" for i in range(3)]
    monitor = re.search(r"sentinel monitor (\S+) ", SENTINEL_SCRIPT)
    assert monitor
    urls = {env(d)["REDIS_URL"] for d in of_kind("Deployment").values() if "REDIS_URL" in env(d)}
    assert urls == {f"redis+sentinel://{','.join(sentinels)}/{monitor[1]}/0"}
