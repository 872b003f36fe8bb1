"""docker-compose.yml and the Dockerfile agree with the workspace they deploy.

Adding a service without a compose entry, naming an environment variable no
settings class reads, or a NATS user the config does not know fails here, before
anyone runs ``docker compose up``.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from effectgate.shared.config.keyring import HOLDERS, PUBLIC
from tests.deploy.settings_env import settings_class, settings_env_names, workspace_services

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
NATS_CONF = ROOT / "deploy" / "nats" / "nats.conf"
NATS_TLS_CONF = ROOT / "deploy" / "nats" / "nats-tls.conf"
NATS_CLUSTER_CONF = ROOT / "deploy" / "nats" / "nats-cluster.conf"
PINNED_TAG = re.compile(r"^v?\d+(\.\d+)*(-[A-Za-z0-9.]+)?$")  # 7, 2.10, 3.11-slim; never latest


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def module_run(service: dict[str, Any]) -> str | None:
    """``X`` when the service runs ``python -m effectgate.X``."""
    command = command_of(service)
    if command[:2] == ["python", "-m"] and len(command) > 2 and command[2].startswith("effectgate."):
        return command[2].removeprefix("effectgate.")
    return None


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(key): str(value) for key, value in env.items()}


RUNS = {name: module for name, service in SERVICES.items() if (module := module_run(service))}
FRONT_ENDS = {"surface"}
"""Not run by compose: the MCP surface acts for each principal with that agent's own credentials file, which
compose does not write (its clients connect from outside); run ``effectgate mcp serve`` beside the stack."""
WORKSPACE_SERVICES = [service for service in workspace_services() if service not in FRONT_ENDS]


def test_compose_runs_exactly_the_workspace_services() -> None:
    assert sorted(RUNS.values()) == WORKSPACE_SERVICES
    assert all(name == module for name, module in RUNS.items()), RUNS


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_has_a_module_entry_point(service: str) -> None:
    assert (ROOT / "services" / service / "src" / "effectgate" / service / "__main__.py").is_file()


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_every_environment_variable_is_a_setting_of_its_service(service: str) -> None:
    named = set(environment_of(SERVICES[service]))
    assert named, f"{service} gets no environment"
    assert named <= settings_env_names(settings_class(service)), named - settings_env_names(settings_class(service))


def test_settings_env_names_follow_aliases_and_prefixes() -> None:
    names = settings_env_names(settings_class("policy"))
    assert {"NATS_URL", "REDIS_URL", "EFFECTGATE_KEYS_DIR", "EFFECTGATE_POLICY_POLICY_FILE"} <= names
    assert "EFFECTGATE_POLICY_NATS_URL" not in names and "EFFECTGATE_NATS_URL" not in names


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_is_built_from_the_repository_dockerfile(service: str) -> None:
    build = SERVICES[service]["build"]
    context = build if isinstance(build, str) else build.get("context", ".")
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (ROOT / context / dockerfile).resolve() == ROOT / "Dockerfile"


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_connects_to_nats_as_its_own_user(service: str) -> None:
    environment = environment_of(SERVICES[service])
    assert environment["NATS_URL"] == "tls://nats:4222"  # no credentials in a URL: they would reach one server only
    assert environment["EFFECTGATE_NATS_USER"] == service
    assert re.match(r"^\$\{NATS_[A-Z_]+_PASSWORD:\?[^}]*\}$", environment["EFFECTGATE_NATS_PASSWORD"])
    assert re.search(rf'\{{\s*user:\s*"{service}",', NATS_CONF.read_text()), f"no NATS user {service}"


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """``{target: source}`` of a service's volumes."""
    return {target: source for source, target in (volume.split(":")[:2] for volume in service.get("volumes", []))}


def with_defaults(value: str) -> str:
    """A compose value with every ``${NAME:-default}`` read as its default (nothing set)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def test_nats_runs_jetstream_with_the_deploy_config_over_tls() -> None:
    nats = SERVICES["nats"]
    command = [with_defaults(part) for part in command_of(nats)]
    assert "-js" in command or "--jetstream" in command
    flag = next(i for i, arg in enumerate(command) if arg in ("-c", "--config"))
    config = Path(command[flag + 1])
    assert (ROOT / mounts(nats)[str(config)]).resolve() == NATS_TLS_CONF
    included = re.search(r'^include "([^"]+)"', NATS_TLS_CONF.read_text(), re.M)
    assert included, "nats-tls.conf must include the generated users and permissions"
    assert (ROOT / mounts(nats)[str(config.parent / included[1])]).resolve() == NATS_CONF


def test_nats_serves_tls_only_from_the_first_byte_with_the_generated_certificate() -> None:
    text = re.sub(r"#.*", "", NATS_TLS_CONF.read_text())
    block = re.search(r"^tls\s*\{([^}]*)\}", text, re.M)
    assert block, "no tls { } block"
    settings = dict(re.findall(r"^\s*(\w+):\s*(\S+)", block[1], re.M))
    assert settings["handshake_first"] == "true"
    tls_dir = next(target for target, source in mounts(SERVICES["nats"]).items() if source == "nats-tls")
    assert settings["cert_file"].strip('"') == f"{tls_dir}/server.pem"
    assert settings["key_file"].strip('"') == f"{tls_dir}/server.key"
    assert "authorization" in NATS_CONF.read_text()


def test_certificates_are_generated_once_before_nats_starts() -> None:
    tls = SERVICES["tls"]
    command = command_of(tls)
    assert command[:4] == ["effectgate", "tls", "generate", "/nats-tls"]
    hosts = {command[i + 1] for i, arg in enumerate(command) if arg == "--host"}
    assert {"nats", "localhost"} <= hosts, "the names services and host clients dial"
    assert command[command.index("--ca-dir") + 1] == "/nats-ca"
    assert mounts(tls) == {"/nats-tls": "nats-tls", "/nats-ca": "nats-ca"}
    assert SERVICES["nats"]["depends_on"]["tls"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_verifies_the_server_with_the_ca_and_never_sees_its_key(service: str) -> None:
    ca_file = environment_of(SERVICES[service])["EFFECTGATE_NATS_CA_FILE"]
    volumes = mounts(SERVICES[service])
    assert volumes[str(Path(ca_file).parent)] == "nats-ca"
    assert "nats-tls" not in volumes.values(), "only nats holds the server's key"
    assert all(volume.endswith(":ro") for volume in SERVICES[service]["volumes"] if volume.startswith("nats-ca:"))


SERVICE_MOUNTS = {
    "registry": {"keys-registry", "./deploy/tools", "nats-ca"},
    "policy": {"keys-policy", "nats-ca", "./deploy/policy"},
    "approvals": {"keys-approvals", "nats-ca", "./deploy/policy"},
    "executor": {"keys-executor", "nats-ca", "sandbox"},
    "audit": {"keys-audit", "audit-data", "nats-ca"},
    "chatops": {"keys-chatops", "nats-ca", "chatops-data", "./deploy/policy", "./deploy/chat"},
}


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_mounts_only_what_it_needs(service: str) -> None:
    assert set(mounts(SERVICES[service]).values()) == SERVICE_MOUNTS[service]


def test_nats_gets_every_password_its_config_reads() -> None:
    config_vars = set(re.findall(r"password:\s*\$([A-Z_][A-Z0-9_]*)", NATS_CONF.read_text()))
    assert config_vars, "no passwords in nats.conf"
    cluster_vars = set(re.findall(r"\$([A-Z_][A-Z0-9_]*)", NATS_CLUSTER_CONF.read_text()))
    assert config_vars | cluster_vars == set(environment_of(SERVICES["nats"]))


def test_keys_are_generated_once_before_the_services_that_hold_them() -> None:
    assert command_of(SERVICES["keys"]) == ["effectgate", "keys", "generate", "/keys"]
    assert mounts(SERVICES["keys"]) == {f"/keys/{holder}": f"keys-{holder}" for holder in (*HOLDERS, PUBLIC)}
    for service in WORKSPACE_SERVICES:
        condition = SERVICES[service]["depends_on"]["keys"]["condition"]
        assert condition == "service_completed_successfully"
        assert environment_of(SERVICES[service])["EFFECTGATE_KEYS_DIR"] == "/keys"


@pytest.mark.parametrize("service", WORKSPACE_SERVICES)
def test_each_service_mounts_its_own_keys_alone_read_only(service: str) -> None:
    """The volume of a holder holds only its private key (effectgate.shared.config.keyring): no other is reachable."""
    keys = [volume for volume in SERVICES[service]["volumes"] if volume.startswith("keys-")]
    assert keys == [f"keys-{service}:/keys:ro"]


def test_executor_sandbox_is_a_volume() -> None:
    root = environment_of(SERVICES["executor"])["EFFECTGATE_EXECUTOR_SANDBOX_ROOT"]
    assert any(volume.split(":")[1] == root for volume in SERVICES["executor"]["volumes"])


def test_bind_mounts_exist_in_the_repository() -> None:
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source}"


def images() -> list[str]:
    pulled = [str(service["image"]) for service in SERVICES.values() if "image" in service]
    dockerfile = (ROOT / "Dockerfile").read_text()
    return pulled + re.findall(r"^FROM\s+(\S+)", dockerfile, re.M)


@pytest.mark.parametrize("image", images())
def test_images_are_pinned_to_a_major_version(image: str) -> None:
    name, _, tag = image.partition(":")
    assert name and PINNED_TAG.match(tag), f"{image}: pin a major version, not latest"


def test_nats_and_redis_images() -> None:
    assert SERVICES["nats"]["image"].startswith("nats:") and SERVICES["redis"]["image"].startswith("redis:")
