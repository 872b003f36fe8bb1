"""Each effectgate service on Kubernetes runs what the image runs, with the settings it reads.

Offline, from the resource files of deploy/kubernetes (tests/deploy/manifests.py): its command is the
Dockerfile's and compose's entry point, every environment name is one its settings class reads, its
probes hit its own health port, it mounts only its own Secrets, and a NetworkPolicy confines it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from effectgate.shared.config.bus import BusSettings
from effectgate.shared.config.keyring import HOLDERS
from tests.deploy.manifests import (
    KUSTOMIZATION,
    Object,
    container,
    env,
    labels_match,
    mounts,
    of_kind,
    pod_spec,
    port_number,
)
from tests.deploy.settings_env import ROOT, settings_class, settings_env_names, workspace_services

SERVICES = workspace_services()
DEPLOYMENTS = of_kind("Deployment")
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
SHARE_WORK = {"policy", "approvals", "executor", "surface"}
"""Services whose replicas share one durable consumer (or, the surface, stateless requests): two replicas."""
BUS_SETTINGS = settings_env_names(BusSettings)
"""The bus layout (replicas, limits) every service may read besides its own settings."""
FRONT_END = "surface"
NATS_PODS = [f"nats-{i}.nats-headless" for i in range(of_kind("StatefulSet")["nats"]["spec"]["replicas"])]


def test_each_workspace_service_is_one_deployment() -> None:
    assert sorted(DEPLOYMENTS) == SERVICES


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_runs_its_module_from_the_image(service: str) -> None:
    box = container(DEPLOYMENTS[service])
    assert box["command"] == ["python", "-m", f"effectgate.{service}"]
    assert box["image"].partition(":")[0] in {image["name"] for image in KUSTOMIZATION["images"]}
    assert re.search(r'^CMD \["sh", "-c", "exec python -m effectgate\.\$\{SERVICE\}"\]', _dockerfile(), re.M)
    if service in COMPOSE:
        assert COMPOSE[service]["command"] == box["command"]


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


@pytest.mark.parametrize("service", SERVICES)
def test_every_environment_name_is_a_setting_of_its_service(service: str) -> None:
    names = {item["name"] for item in container(DEPLOYMENTS[service])["env"]}
    unknown = names - settings_env_names(settings_class(service)) - BUS_SETTINGS
    assert not unknown, f"{service} sets {unknown}, which no setting reads"


@pytest.mark.parametrize("service", sorted(set(SERVICES) - {FRONT_END}))
def test_both_probes_hit_the_services_own_health_port(service: str) -> None:
    deployment, box = DEPLOYMENTS[service], container(DEPLOYMENTS[service])
    health_port = int(env(deployment)[f"EFFECTGATE_{service.upper()}_HTTP_PORT"])
    assert env(deployment)[f"EFFECTGATE_{service.upper()}_HTTP_HOST"] == "0.0.0.0"
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        assert box[probe]["httpGet"]["path"] == path
        assert port_number(deployment, box[probe]["httpGet"]["port"]) == health_port, probe


def test_the_surface_is_probed_on_its_mcp_port() -> None:
    """The surface serves /livez and /readyz beside its MCP path, on the port it serves MCP on."""
    surface = DEPLOYMENTS[FRONT_END]
    port = int(env(surface)["EFFECTGATE_SURFACE_PORT"])
    assert env(surface)["EFFECTGATE_SURFACE_HOST"] == "0.0.0.0"
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        assert container(surface)[probe]["httpGet"]["path"] == path
        assert port_number(surface, container(surface)[probe]["httpGet"]["port"]) == port


def secrets_of(deployment: Object) -> dict[str, str]:
    """Mount path → Secret name, and every Secret the environment names (path ``env``)."""
    found = {path: v["secret"]["secretName"] for path, v in mounts(deployment).items() if "secret" in v}
    box = container(deployment)
    refs = [e["valueFrom"].get("secretKeyRef", {}).get("name") for e in box.get("env", []) if "valueFrom" in e]
    refs += [source.get("secretRef", {}).get("name") for source in box.get("envFrom", [])]
    return found | {f"env:{name}": name for name in refs if name}


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_mounts_only_its_own_secrets(service: str) -> None:
    """A Secret named <service>-…, and no other service mounts it: one pod's keys or password are not another's."""
    own = secrets_of(DEPLOYMENTS[service])
    assert own and all(name.startswith(f"{service}-") for name in own.values()), own
    assert not any(path.startswith("env:") for path in own), "credentials are files, not environment values"
    others = {name for other in SERVICES if other != service for name in secrets_of(DEPLOYMENTS[other]).values()}
    assert not set(own.values()) & others


@pytest.mark.parametrize("service", sorted(set(SERVICES) & set(HOLDERS)))
def test_each_holder_reads_its_own_keys_and_its_own_nats_password(service: str) -> None:
    deployment = DEPLOYMENTS[service]
    assert secrets_of(deployment)[env(deployment)["EFFECTGATE_KEYS_DIR"]] == f"{service}-keys"
    password = Path(env(deployment)["EFFECTGATE_NATS_PASSWORD_FILE"])
    assert secrets_of(deployment)[str(password.parent)] == f"{service}-nats"
    assert env(deployment)["EFFECTGATE_NATS_USER"] == service
    assert "@" not in env(deployment)["NATS_URL"], "no password in the URL"


def test_the_surface_holds_the_agents_credentials_and_only_public_keys() -> None:
    surface = DEPLOYMENTS[FRONT_END]
    assert secrets_of(surface)[env(surface)["EFFECTGATE_SURFACE_CREDENTIALS_DIR"]] == "surface-credentials"
    assert secrets_of(surface)[env(surface)["EFFECTGATE_SURFACE_PUBLIC_KEYS_DIR"]] == "surface-keys"
    assert secrets_of(surface)[str(Path(env(surface)["EFFECTGATE_SURFACE_TOKENS_FILE"]).parent)] == "surface-tokens"


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_verifies_nats_with_the_ca_and_dials_every_node(service: str) -> None:
    deployment = DEPLOYMENTS[service]
    urls = env(deployment)["NATS_URL"].split(",")
    assert [re.sub(r"^tls://|:4222$", "", url) for url in urls] == NATS_PODS
    ca = Path(env(deployment)["EFFECTGATE_NATS_CA_FILE"])
    assert mounts(deployment)[str(ca.parent)]["configMap"]["name"] == "nats-ca"


@pytest.mark.parametrize("service", SERVICES)
def test_replicas_follow_whether_the_service_shares_work(service: str) -> None:
    spec = DEPLOYMENTS[service]["spec"]
    assert spec["replicas"] == (2 if service in SHARE_WORK else 1)
    if service in SHARE_WORK:
        assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0, "an upgrade keeps one replica serving"
        assert of_kind("PodDisruptionBudget")[service]["spec"]["minAvailable"] == 1


def test_the_audit_is_one_writer_never_two_at_once() -> None:
    audit = DEPLOYMENTS["audit"]
    assert audit["spec"]["replicas"] == 1 and audit["spec"]["strategy"] == {"type": "Recreate"}
    database = Path(env(audit)["EFFECTGATE_AUDIT_DATABASE"])
    claim = mounts(audit)[str(database.parent)]["persistentVolumeClaim"]["claimName"]
    assert of_kind("PersistentVolumeClaim")[claim]["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_the_registry_creates_streams_with_as_many_replicas_as_nats_has_nodes() -> None:
    assert int(env(DEPLOYMENTS["registry"])["EFFECTGATE_BUS_REPLICAS"]) == len(NATS_PODS)
    assert not any("EFFECTGATE_BUS_REPLICAS" in env(d) for name, d in DEPLOYMENTS.items() if name != "registry")


def test_the_executors_share_one_sandbox() -> None:
    executor = DEPLOYMENTS["executor"]
    claim = mounts(executor)[env(executor)["EFFECTGATE_EXECUTOR_SANDBOX_ROOT"]]["persistentVolumeClaim"]
    assert of_kind("PersistentVolumeClaim")[claim["claimName"]]["spec"]["accessModes"] == ["ReadWriteMany"]


# --- NetworkPolicies -----------------------------------------------------------------------------

POLICIES = of_kind("NetworkPolicy")
TAKES_INGRESS = {"surface": 8765, "chatops": 3000}
STORES = {"nats", "redis", "redis-sentinel"}


def test_everything_is_denied_unless_a_policy_allows_it() -> None:
    spec = POLICIES["default-deny"]["spec"]
    assert spec == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_has_its_network_policy(service: str) -> None:
    selecting = [
        p
        for p in POLICIES.values()
        if p["spec"]["podSelector"] and labels_match(p["spec"]["podSelector"], DEPLOYMENTS[service])
    ]
    assert [p["metadata"]["name"] for p in selecting] == [service]
    assert selecting[0]["spec"]["policyTypes"] == ["Ingress", "Egress"]


@pytest.mark.parametrize("service", SERVICES)
def test_services_reach_only_nats_and_redis(service: str) -> None:
    for rule in POLICIES[service]["spec"]["egress"]:
        ports = {p["port"] for p in rule["ports"]}
        pods = {
            peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
            for peer in rule["to"]
            if "podSelector" in peer and "namespaceSelector" not in peer
        }
        assert pods <= STORES
        if not pods:  # the cluster's DNS, or the chat platform's API for the chat-ops bot alone
            assert ports == {53} or (service == "chatops" and ports == {443}), rule


@pytest.mark.parametrize("service", SERVICES)
def test_only_the_front_ends_take_ingress(service: str) -> None:
    ingress = POLICIES[service]["spec"]["ingress"]
    expected = [{"ports": [{"protocol": "TCP", "port": TAKES_INGRESS[service]}]}] if service in TAKES_INGRESS else []
    assert ingress == expected


def test_nats_takes_clients_only_from_the_services() -> None:
    (clients,) = [r for r in POLICIES["nats"]["spec"]["ingress"] if r["ports"][0]["port"] == 4222]
    assert {p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in clients["from"]} == set(SERVICES)


@pytest.mark.parametrize("service", SERVICES)
def test_each_pod_runs_without_a_service_account_token(service: str) -> None:
    assert pod_spec(DEPLOYMENTS[service])["automountServiceAccountToken"] is False


def every_secret() -> set[str]:
    """Every Secret a workload of deploy/kubernetes mounts or reads its environment from."""
    workloads = [*DEPLOYMENTS.values(), *of_kind("StatefulSet").values()]
    return {name for workload in workloads for name in secrets_of(workload).values()}


@pytest.mark.parametrize("secret", sorted(every_secret()))
def test_the_production_page_says_how_to_make_each_secret(secret: str) -> None:
    """None is committed: docs/how-to/run-in-production.md names each, or its ``<service>-…`` form with the service."""
    page = (ROOT / "docs" / "how-to" / "run-in-production.md").read_text()
    service, _, suffix = secret.partition("-")
    rows = [line for line in page.splitlines() if f"`<service>-{suffix}`" in line]
    assert f"`{secret}`" in page or any(service in row for row in rows), secret
