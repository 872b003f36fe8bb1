"""OpenTelemetry setup for a service: traces over OTLP/HTTP when an endpoint is set; metrics.

The tracer provider is returned, not installed globally, and handed to FastStream's
``NatsTelemetryMiddleware``, which propagates W3C ``traceparent`` in NATS headers. The
meter provider is installed once per process (:func:`effectgate.shared.runtime.metrics.install_meter_provider`).
"""

from __future__ import annotations

import os

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider, TraceBasedExemplarFilter
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry

__all__ = ["meter_provider", "tracer_provider"]

METRICS_EXPORT_INTERVAL_MS = 15_000
"""How often metrics are pushed over OTLP when an endpoint is set, milliseconds (the standard
``OTEL_METRIC_EXPORT_INTERVAL``, when set, takes its place)."""


def _resource(service: str) -> Resource:
    return Resource.create({SERVICE_NAME: f"effectgate-{service}"})


def tracer_provider(service: str, otlp_endpoint: str | None) -> TracerProvider:
    """Return a tracer provider for ``service``, exporting to ``otlp_endpoint`` if given.

    Args:
        service: the ``service.name`` resource attribute.
        otlp_endpoint: OTLP/HTTP base URL (``/v1/traces`` is appended), or ``None``.
    """
    provider = TracerProvider(resource=_resource(service))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def meter_provider(service: str, otlp_endpoint: str | None, registry: CollectorRegistry) -> MeterProvider:
    """Return a meter provider read into ``registry`` (Prometheus text), and pushed over OTLP if given.

    Exemplars are kept for measurements made while a sampled span is active
    (``trace_based``); only the OTLP export carries them.

    Args:
        service: the ``service.name`` resource attribute.
        otlp_endpoint: OTLP/HTTP base URL (``/v1/metrics`` is appended), or ``None``.
        registry: the prometheus_client registry ``/metrics`` serves.
    """
    readers: list[MetricReader] = [PrometheusMetricReader(scope_info_enabled=False, registry=registry)]
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        exporter = OTLPMetricExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/metrics")
        interval_ms = None if os.environ.get("OTEL_METRIC_EXPORT_INTERVAL") else METRICS_EXPORT_INTERVAL_MS
        readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=interval_ms))
    return MeterProvider(
        resource=_resource(service), metric_readers=readers, exemplar_filter=TraceBasedExemplarFilter()
    )
