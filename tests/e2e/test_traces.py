"""One trace per call across the services, and exemplars linking its metrics to that trace.

The services export over OTLP/HTTP to a collector run by this module (it keeps every
posted body); W3C trace context travels in the headers of each stream event.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider

pytestmark = pytest.mark.e2e


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP receiver keeping each decoded export request, by path."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.received: dict[str, list[bytes]] = {"/v1/traces": [], "/v1/metrics": []}
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[tuple[str, Any]]:
        """Every span received so far, with its service's name."""
        found = []
        for body in self._bodies("/v1/traces"):
            for resource in ExportTraceServiceRequest.FromString(body).resource_spans:
                service = next(a.value.string_value for a in resource.resource.attributes if a.key == "service.name")
                found += [(service, span) for scope in resource.scope_spans for span in scope.spans]
        return found

    def exemplar_trace_ids(self) -> dict[str, set[bytes]]:
        """Trace ids of the exemplars received so far, by metric name."""
        ids: dict[str, set[bytes]] = {}
        for body in self._bodies("/v1/metrics"):
            for resource in ExportMetricsServiceRequest.FromString(body).resource_metrics:
                for metric in (m for scope in resource.scope_metrics for m in scope.metrics):
                    ids.setdefault(metric.name, set()).update(_exemplar_ids(metric))
        return ids

    def _bodies(self, path: str) -> list[bytes]:
        with self.lock:
            return list(self.received[path])


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.received.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet
        pass


def _exemplar_ids(metric: Any) -> set[bytes]:
    kind = metric.WhichOneof("data")
    points = getattr(metric, kind).data_points if kind else []
    return {exemplar.trace_id for point in points for exemplar in point.exemplars}


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def stack_env(collector: Collector) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


def until(found: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := found()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return value


def services_in(collector: Collector, trace_id: bytes, wanted: set[str]) -> dict[str, list[Any]]:
    spans: dict[str, list[Any]] = {}
    for service, span in collector.spans():
        if span.trace_id == trace_id:
            spans.setdefault(service, []).append(span)
    return spans if wanted <= set(spans) else {}


WANTED = {"effectgate-policy", "effectgate-executor", "effectgate-audit"}


async def test_an_agents_trace_continues_through_policy_executor_and_audit(gate: Any, collector: Collector) -> None:
    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("agent call") as span:
        receipt = await gate.call(gate.agent(), "read", {"path": "hello.txt"})
    trace_id, agent_span = span.get_span_context().trace_id.to_bytes(16, "big"), span.get_span_context().span_id

    def whole() -> dict[str, list[Any]]:  # spans are exported in batches: wait for the executor's and the audit's
        spans = services_in(collector, trace_id, WANTED)
        policy_ids = {s.span_id for s in spans.get("effectgate-policy", [])}
        executed = any(s.parent_span_id in policy_ids for s in spans.get("effectgate-executor", []))
        return spans if executed and len(spans.get("effectgate-audit", [])) >= 3 else {}

    spans = until(whole) or services_in(collector, trace_id, WANTED)
    assert receipt.outcome == "succeeded" and spans, f"services in the trace: {set(spans)}"
    policy = spans["effectgate-policy"]
    assert any(int.from_bytes(s.parent_span_id, "big") == agent_span for s in policy), "policy's span is not a child"
    policy_ids = {s.span_id for s in policy}
    assert any(s.parent_span_id in policy_ids for s in spans["effectgate-executor"]), "executor: parent not policy"
    assert len(spans["effectgate-audit"]) >= 3  # the request, the decision and the receipt, each in this trace


async def test_a_call_without_an_agent_trace_is_one_trace_from_the_policy_on(gate: Any, collector: Collector) -> None:
    receipt = await gate.call(gate.agent(), "read", {"path": "hello.txt"})

    def executor_span() -> Any:
        named = (s for service, s in collector.spans() if service == "effectgate-executor")
        return next((s for s in named if receipt.request_id in _subject(s)), None)

    executed = until(executor_span)
    assert executed is not None, "no executor span for the call"
    spans = until(lambda: services_in(collector, executed.trace_id, {"effectgate-policy", "effectgate-executor"}))
    roots = [s for s in spans.get("effectgate-policy", []) if s.parent_span_id == b""]
    assert roots, "the policy did not start the call's trace"
    assert executed.parent_span_id in {s.span_id for s in spans["effectgate-policy"]}


async def test_metrics_recorded_during_a_call_carry_its_trace_id_as_exemplars(gate: Any, collector: Collector) -> None:
    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("agent call") as span:
        await gate.call(gate.agent(), "read", {"path": "hello.txt"})
    trace_id = span.get_span_context().trace_id.to_bytes(16, "big")

    def linked() -> list[str]:
        return sorted(name for name, ids in collector.exemplar_trace_ids().items() if trace_id in ids)

    names = until(linked)
    assert names, "no metric carries the call's trace id as an exemplar"


def _subject(span: Any) -> str:
    return next((a.value.string_value for a in span.attributes if a.key == "messaging.destination.name"), "")
