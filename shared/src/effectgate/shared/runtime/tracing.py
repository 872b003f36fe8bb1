"""One trace per call across the services: W3C Trace Context in the headers of every stream event.

The trace context (https://www.w3.org/TR/trace-context/, ``traceparent`` / ``tracestate``)
travels in NATS message headers, injected and extracted by OpenTelemetry's global
propagator. Until :func:`enable` is called (a service with ``OTEL_EXPORTER_OTLP_ENDPOINT``
set), both functions do nothing: no span is made and no header is added.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager

from opentelemetry import propagate
from opentelemetry.trace import SpanKind, Tracer, TracerProvider

__all__ = ["carried", "consuming", "enable"]

_tracer: Tracer | None = None


def enable(provider: TracerProvider) -> None:
    """Trace durable consumers and propagate context from now on, with ``provider``'s tracer."""
    global _tracer
    _tracer = provider.get_tracer("effectgate")


def carried(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the current trace context added (``traceparent``), when tracing is enabled."""
    if _tracer is not None:
        propagate.inject(headers)
    return headers


def consuming(consumer: str, subject: str, headers: Mapping[str, str] | None) -> AbstractContextManager[object]:
    """The context to handle one delivered event in: a ``CONSUMER`` span continuing its trace.

    Untraced (tracing not enabled), a shared no-op context: nothing is made per message.

    Args:
        consumer: the durable consumer's name (the span is ``<consumer> process``).
        subject: the event's subject (``messaging.destination.name``).
        headers: the message's headers; without a ``traceparent`` the span starts a trace.
    """
    if _tracer is None:
        return _UNTRACED
    context = propagate.extract(dict(headers or {}))
    attributes = {"messaging.system": "nats", "messaging.destination.name": subject}
    return _tracer.start_as_current_span(f"{consumer} process", context, SpanKind.CONSUMER, attributes)


_UNTRACED = contextlib.nullcontext()
