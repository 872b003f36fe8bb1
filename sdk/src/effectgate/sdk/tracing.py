"""The caller's trace context on each request, when the agent uses OpenTelemetry.

With ``opentelemetry-api`` installed (``effectgate-sdk[otel]``) and a span active when the
request is submitted, its W3C Trace Context (https://www.w3.org/TR/trace-context/,
``traceparent``) is added to the request's headers, so effectgate's spans for the call
join the agent's trace. Without the package, or with no span active, nothing is added.
"""

from __future__ import annotations

try:
    from opentelemetry import propagate
except ImportError:  # the agent does not trace
    propagate = None  # type: ignore[assignment]

__all__ = ["with_trace_context"]


def with_trace_context(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the active span's ``traceparent`` (and ``tracestate``) added, if any."""
    if propagate is not None:
        propagate.inject(headers)
    return headers
