"""Readiness checks, the HTTP endpoints and the recording of decisions and receipts."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from faststream.nats import NatsBroker
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, Counter

from effectgate.contracts.bus import catalog
from effectgate.contracts.events import DecisionMade, ReceiptIssued
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.shared.consumer.consumers import Consumer
from effectgate.shared.runtime import metrics
from effectgate.shared.runtime.assembly import Lifecycle
from effectgate.shared.runtime.health import HealthServer, not_ready
from effectgate.shared.runtime.monitor import base_checks
from effectgate.shared.runtime.nats_watch import ConnectionWatch
from effectgate.shared.runtime.sampling import Sampler


def _broken() -> str | None:
    raise RuntimeError("service not started")


def test_ready_when_every_check_passes() -> None:
    assert not_ready({"nats": lambda: None, "policy": lambda: None}) == {}


def test_each_failing_check_is_named_with_its_reason() -> None:
    found = not_ready({"nats": lambda: "not connected to NATS", "policy": lambda: None, "store": _broken})
    assert found == {"nats": "not connected to NATS", "store": "the check failed: RuntimeError: service not started"}


async def _get(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as answer:
        return answer.status, answer.headers.get("Content-Type", ""), await answer.text()


async def test_the_server_answers_livez_readyz_and_metrics() -> None:
    reasons: dict[str, str | None] = {"nats": "not connected to NATS"}
    registry = CollectorRegistry()
    Counter("effectgate_probe", "a counter", registry=registry).inc()
    server = HealthServer("127.0.0.1", 0, {"nats": lambda: reasons["nats"]}, registry)
    await server.start()
    try:
        assert (await _get(server.port, "/livez"))[0] == 200
        status, kind, body = await _get(server.port, "/readyz")
        assert (status, kind) == (503, "application/json; charset=utf-8")
        assert '"not_ready": {"nats": "not connected to NATS"}' in body
        reasons["nats"] = None
        assert (await _get(server.port, "/readyz"))[:2] == (200, "application/json; charset=utf-8")
        status, kind, body = await _get(server.port, "/metrics")
        assert status == 200 and kind.startswith("text/plain") and "effectgate_probe_total 1.0" in body
        assert (await _get(server.port, "/nothing"))[0] == 404
    finally:
        await server.stop()


async def test_the_server_serves_a_socket_bound_before_it_started_and_reports_its_port() -> None:
    bound = socket.socket()
    bound.bind(("127.0.0.1", 0))
    bound.listen()
    port = bound.getsockname()[1]
    server = HealthServer("127.0.0.1", 9, {}, CollectorRegistry(), sock=bound)  # port 9 is never bound
    await server.start()
    try:
        assert server.port == port
        assert (await _get(port, "/livez"))[0] == 200
    finally:
        await server.stop()


async def test_a_failing_probe_keeps_the_sampler_running_and_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []

    async def broken() -> None:
        calls.append("broken")
        raise ConnectionError("no NATS")

    async def working() -> None:
        calls.append("working")

    sampler = Sampler([broken, working], interval_s=0.01)
    sampler.start()
    await asyncio.sleep(0.1)
    await sampler.stop()
    assert calls.count("working") >= 2 and calls.count("broken") >= 2
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["metrics probe broken failed (ConnectionError: no NATS); its gauges keep their last values"]


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> InMemoryMetricReader:
    """The instruments recreated on a meter read into memory."""
    found = InMemoryMetricReader()
    instruments = metrics.Instruments(MeterProvider(metric_readers=[found]).get_meter("test"))
    monkeypatch.setattr(metrics, "INSTRUMENTS", instruments)
    return found


def decision(verdict: str, code: str) -> DecisionMade:
    now = datetime.now(UTC)
    return DecisionMade(
        event_id="e1",
        occurred_at=now,
        request_id="r1",
        principal="a",
        verdict=Verdict(verdict),
        reason_code=code,
        reason="",
    )


def receipt(outcome: str, duration_ms: float | None) -> ReceiptIssued:
    now = datetime.now(UTC)
    return ReceiptIssued(
        event_id="e2",
        occurred_at=now,
        request_id="r1",
        principal="a",
        outcome=Outcome(outcome),
        reason_code="ok",
        reason="",
        duration_ms=duration_ms,
    )


def test_a_decision_is_counted_by_verdict_and_reason_code_and_a_rate_limit_separately(
    reader: InMemoryMetricReader,
) -> None:
    metrics.record_published(decision("deny", "rate_limited"))
    metrics.record_published(decision("execute", "allowed"))
    points = _points(reader)
    counted = {(p.attributes["verdict"], p.attributes["reason_code"]): p.value for p in points["effectgate_decisions"]}
    assert counted == {("deny", "rate_limited"): 1, ("execute", "allowed"): 1}
    assert [p.value for p in points["effectgate_rate_limit_rejections"]] == [1]


def test_a_receipt_is_counted_by_outcome_with_its_execution_time(reader: InMemoryMetricReader) -> None:
    metrics.record_published(receipt("succeeded", 250.0))
    metrics.record_published(receipt("denied", None))
    points = _points(reader)
    assert {p.attributes["outcome"]: p.value for p in points["effectgate_receipts"]} == {"succeeded": 1, "denied": 1}
    [execution] = points["effectgate_stage_duration"]
    assert execution.attributes == {"stage": "execution"} and (execution.count, execution.sum) == (1, 0.25)


def test_a_call_and_a_clock_running_backwards_are_recorded(reader: InMemoryMetricReader) -> None:
    now = datetime.now(UTC)
    metrics.record_call(now - timedelta(seconds=2), now)
    metrics.record_call(now, now - timedelta(seconds=1))
    [call] = _points(reader)["effectgate_call_duration"]
    assert (call.count, call.sum) == (2, 2.0)


def test_pending_approvals_report_their_count_and_the_oldest_age() -> None:
    now = datetime.now(UTC)
    metrics.record_pending_approvals([now - timedelta(seconds=30), now - timedelta(seconds=5)], now)
    assert metrics.APPROVALS_PENDING.values == {(): 2.0}
    assert metrics.APPROVAL_OLDEST_AGE.values == {(): 30.0}
    metrics.record_pending_approvals([], now)
    assert metrics.APPROVALS_PENDING.values == {(): 0.0} and metrics.APPROVAL_OLDEST_AGE.values == {(): 0.0}


async def test_a_service_is_not_ready_before_it_connects_and_binds_its_consumers() -> None:
    broker = NatsBroker("nats://127.0.0.1:1")
    plan = Lifecycle(
        consumers=[Consumer(catalog.POLICY_CONSUMER, _never)], ready_checks={"policy": lambda: "no policy"}
    )
    started = asyncio.Event()
    checks = base_checks(broker, plan, [], started)
    assert not_ready(checks) == {
        "nats": "not connected to NATS",
        "consumers": "starting: 0 of 1 durable consumers bound",
        "policy": "no policy",
    }
    started.set()
    assert set(not_ready(checks)) == {"nats", "policy"}


async def test_a_service_without_consumers_says_it_is_still_building_before_it_starts() -> None:
    started = asyncio.Event()
    checks = base_checks(NatsBroker("nats://127.0.0.1:1"), Lifecycle(), [], started)

    assert not_ready(checks)["consumers"] == "starting: connecting and building"
    started.set()
    assert "consumers" not in not_ready(checks)


async def test_nats_readiness_names_what_the_connection_is_doing_and_its_last_error() -> None:
    watch, started = ConnectionWatch("registry", refused_exit_s=60.0), asyncio.Event()
    checks = base_checks(NatsBroker("nats://127.0.0.1:1"), Lifecycle(), [], started, watch)
    await watch.on_disconnected()
    await watch.on_error(ConnectionRefusedError("connect call failed"))

    assert not_ready(checks)["nats"] == "not connected to NATS: reconnecting (last error: connect call failed)"


async def _never(_delivery: Any) -> Any:
    raise AssertionError("not called")
