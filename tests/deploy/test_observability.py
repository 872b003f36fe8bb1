"""The observability half of docker-compose.yml: collector, Prometheus, Jaeger, Grafana.

No Docker here: the compose file and every config it mounts are parsed and checked
against each other and against the services' settings (ports, endpoints, metric names).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES: dict[str, dict[str, Any]] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
OBSERVABILITY = ("otel-collector", "jaeger", "prometheus", "grafana")
EFFECTGATE = ("registry", "policy", "approvals", "executor", "audit", "chatops")
HTTP_PORTS = {"registry": 9471, "policy": 9472, "approvals": 9473, "executor": 9474, "audit": 9475, "chatops": 9476}
"""The stable ports of the shared interface (the same as ``effectgate up``'s defaults)."""


def _bind_sources(service: dict[str, Any]) -> dict[str, Path]:
    """``{target: repository path}`` of a service's bind mounts."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            found[target] = ROOT / source
    return found


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in (service.get("environment") or {}).items()}


def _config(relative: str) -> Any:
    path = ROOT / relative
    return json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())


def test_the_observability_services_run_with_their_configs() -> None:
    for name in OBSERVABILITY:
        assert name in SERVICES, f"{name} missing from docker-compose.yml"
    mounted = {name: _bind_sources(SERVICES[name]) for name in OBSERVABILITY}
    assert mounted["otel-collector"]["/etc/otelcol/config.yaml"].name == "otel-collector.yaml"
    assert "--config=/etc/otelcol/config.yaml" in SERVICES["otel-collector"]["command"]
    assert mounted["prometheus"]["/etc/prometheus/prometheus.yml"].name == "prometheus.yml"
    assert "--enable-feature=exemplar-storage" in SERVICES["prometheus"]["command"]
    assert mounted["grafana"]["/etc/grafana/provisioning"].is_dir()


def test_every_mounted_config_parses() -> None:
    for name in OBSERVABILITY:
        for path in _bind_sources(SERVICES[name]).values():
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            assert files, f"{name}: {path} is empty"
            for file in files:
                parsed = json.loads(file.read_text()) if file.suffix == ".json" else yaml.safe_load(file.read_text())
                assert isinstance(parsed, dict), f"{file} does not parse to a mapping"


@pytest.mark.parametrize("service", EFFECTGATE)
def test_each_service_serves_http_on_its_stable_port_and_pushes_to_the_collector(service: str) -> None:
    env = environment_of(SERVICES[service])
    assert env[f"EFFECTGATE_{service.upper()}_HTTP_PORT"] == str(HTTP_PORTS[service])
    assert env[f"EFFECTGATE_{service.upper()}_HTTP_HOST"] == "0.0.0.0"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector:4318"
    assert not [port for port in SERVICES[service].get("ports", []) if str(HTTP_PORTS[service]) in str(port)]


def test_prometheus_scrapes_every_service_and_the_collector() -> None:
    jobs = {job["job_name"]: job for job in _config("deploy/observability/prometheus.yml")["scrape_configs"]}
    targets = {target for config in jobs["effectgate"]["static_configs"] for target in config["targets"]}
    assert targets == {f"{service}:{port}" for service, port in HTTP_PORTS.items()}
    collector = _config("deploy/observability/otel-collector.yaml")
    exporter_port = collector["exporters"]["prometheus"]["endpoint"].rsplit(":", 1)[1]
    assert jobs["otel-collector"]["static_configs"][0]["targets"] == [f"otel-collector:{exporter_port}"]


def test_the_collector_takes_otlp_and_sends_traces_to_jaeger_and_metrics_with_exemplars() -> None:
    collector = _config("deploy/observability/otel-collector.yaml")
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    assert collector["exporters"]["otlp/jaeger"]["endpoint"] == "jaeger:4317"
    assert collector["exporters"]["prometheus"]["enable_open_metrics"] is True
    pipelines = collector["service"]["pipelines"]
    assert pipelines["traces"]["exporters"] == ["otlp/jaeger"] and pipelines["metrics"]["exporters"] == ["prometheus"]
    for pipeline in pipelines.values():
        assert set(pipeline["receivers"]) <= set(collector["receivers"])
        assert set(pipeline["exporters"]) <= set(collector["exporters"])
        assert set(pipeline.get("processors", [])) <= set(collector.get("processors", {}))


def test_grafana_reads_prometheus_and_jaeger_and_the_dashboard_queries_existing_metrics() -> None:
    provisioning = ROOT / "deploy/observability/grafana/provisioning"
    sources = yaml.safe_load((provisioning / "datasources/datasources.yaml").read_text())["datasources"]
    assert {source["uid"]: source["url"] for source in sources} == {
        "prometheus": "http://prometheus:9090",
        "jaeger": "http://jaeger:16686",
    }
    provider = yaml.safe_load((provisioning / "dashboards/dashboards.yaml").read_text())["providers"][0]
    assert _bind_sources(SERVICES["grafana"])[provider["options"]["path"]].is_dir()
    dashboard = _config("deploy/observability/grafana/dashboards/effectgate.json")
    queried = {name for panel in dashboard["panels"] for t in panel["targets"] for name in _metric_names(t["expr"])}
    assert queried and queried <= _exported()


def _exported() -> set[str]:
    """The names Prometheus stores for each metric docs/reference/metrics.md lists (with a histogram's series)."""
    documented = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    names = set(re.findall(r"^\| `(effectgate_[a-z_]+)`", documented, re.M))
    return names | {f"{name}_{series}" for name in names for series in ("bucket", "count", "sum")}


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\beffectgate_[a-z_]+", expr))


def test_ui_and_nats_ports_are_published_on_this_host_only_by_default() -> None:
    for name in ("jaeger", "prometheus", "grafana"):
        assert all(str(port).startswith("127.0.0.1:") for port in SERVICES[name]["ports"]), name
    assert "otel-collector" not in SERVICES or not SERVICES["otel-collector"].get("ports")
    assert "${EFFECTGATE_NATS_BIND:-127.0.0.1}:4222:4222" in SERVICES["nats"]["ports"]
