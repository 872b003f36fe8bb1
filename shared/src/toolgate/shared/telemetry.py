"""OpenTelemetry setup for a service: traces over OTLP/HTTP when an endpoint is set.

The providers are returned, not installed globally, and handed to FastStream's
``NatsTelemetryMiddleware``, which propagates W3C ``traceparent`` in NATS headers.
"""

from __future__ import annotations

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ["tracer_provider"]


def tracer_provider(service: str, otlp_endpoint: str | None) -> TracerProvider:
    """Return a tracer provider for ``service``, exporting to ``otlp_endpoint`` if given.

    Args:
        service: the ``service.name`` resource attribute.
        otlp_endpoint: OTLP/HTTP base URL (``/v1/traces`` is appended), or ``None``.
    """
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: f"toolgate-{service}"}))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
