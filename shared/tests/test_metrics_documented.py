"""The metrics table of docs/reference/metrics.md is what /metrics exports: names, types, labels, units."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from effectgate.shared.runtime import metrics

METRICS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"
ROW = re.compile(r"^\| `(effectgate_[a-z_]+)` \| (\w+) \| (.*?) \| (\w+) \| .+ \|$", re.M)


def _documented() -> dict[str, tuple[str, set[str], str]]:
    """name → (type, label names, unit) from the documented table."""
    rows = {}
    for name, kind, labels, unit in ROW.findall(METRICS_PAGE.read_text()):
        names = re.sub(r"\([^)]*\)", "", labels)  # a label's values are in parentheses
        rows[name] = (kind, set(re.findall(r"`([a-z_]+)`", names)), unit)
    return rows


def _exported(monkeypatch: pytest.MonkeyPatch) -> dict[str, tuple[str, set[str]]]:
    """name (as Prometheus shows it) → (type, label names) after one value of each instrument."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(scope_info_enabled=False, registry=registry)])
    monkeypatch.setattr(metrics, "INSTRUMENTS", metrics.Instruments(provider.get_meter("test")))
    _record_one_of_each(monkeypatch)
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name.startswith("effectgate_"):
            name = f"{family.name}_total" if family.type == "counter" else family.name
            found[name] = (family.type, {k for s in family.samples for k in s.labels if k != "le"})
    provider.shutdown()
    return found


def _record_one_of_each(monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    instruments = metrics.INSTRUMENTS
    instruments.decisions.add(1, {"verdict": "execute", "reason_code": "allowed"})
    instruments.receipts.add(1, {"outcome": "succeeded"})
    instruments.rate_limited.add(1)
    metrics.record_call(now, now)
    metrics.record_stage("policy", 0.1)
    metrics.record_pending_approvals([now], now)
    metrics.record_appended(now)
    monkeypatch.setattr(metrics.CONSUMER_PENDING, "values", {(("durable", "policy"), ("state", "undelivered")): 1.0})
    metrics.observe_mcp_states(lambda: {"files": "ready"})
    monkeypatch.setattr(metrics.RECORD_STORE_USED, "values", {(): 0.5})


def test_every_documented_metric_is_exported_with_its_type_labels_and_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    documented, exported = _documented(), _exported(monkeypatch)
    assert documented, "no metrics table in docs/reference/metrics.md"
    assert set(documented) == set(exported)
    for name, (kind, labels, unit) in documented.items():
        assert exported[name] == (kind, labels), name
        assert name.removesuffix("_total").endswith("_seconds") == (unit == "seconds"), name
