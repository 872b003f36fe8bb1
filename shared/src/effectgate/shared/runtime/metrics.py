"""The services' metrics: OpenTelemetry instruments, exported as Prometheus text on ``/metrics``.

Every instrument is created once, at import, on the global OpenTelemetry meter (a proxy until
:func:`install_meter_provider` sets the process's provider), so recording costs a counter add
or a histogram record and no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from prometheus_client import CollectorRegistry

from effectgate.contracts.events import DecisionMade, ReceiptIssued

__all__ = [
    "INSTRUMENTS",
    "RECORD_STORE_USED",
    "Sample",
    "install_meter_provider",
    "observe_mcp_states",
    "record_appended",
    "record_call",
    "record_pending_approvals",
    "record_published",
    "record_stage",
]

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
"""Histogram bucket bounds of every latency, seconds (an approval wait can last an hour)."""


class Sample:
    """The last values a probe read, by label set; a gauge reports them as they are.

    Attributes:
        values: label set (a tuple of ``(name, value)`` pairs) → value.
    """

    def __init__(self) -> None:
        self.values: dict[tuple[tuple[str, str], ...], float] = {}

    def replace(self, values: Mapping[tuple[tuple[str, str], ...], float]) -> None:
        """Replace every value at once (a label set no longer read disappears)."""
        self.values = dict(values)

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        """The gauge callback: one observation per label set."""
        return [Observation(value, dict(labels)) for labels, value in self.values.items()]


CONSUMER_PENDING = Sample()
APPROVALS_PENDING = Sample()
APPROVAL_OLDEST_AGE = Sample()
RECORD_STORE_USED = Sample()


class _Process:
    """What this process's gauges read besides samples, and its one registry."""

    last_appended_s: float | None = None
    mcp_states: Callable[[], Mapping[str, str]] | None = None
    registry: CollectorRegistry | None = None


_process = _Process()

MCP_STATES = ("starting", "ready", "unavailable", "degraded")
"""The states an MCP server can be in; the gauge reports 1 for its state and 0 for the others."""


def _audit_lag(_options: CallbackOptions) -> Iterable[Observation]:
    appended = _process.last_appended_s
    return [] if appended is None else [Observation(max(0.0, time.time() - appended))]


def _mcp_state(_options: CallbackOptions) -> Iterable[Observation]:
    states = _process.mcp_states() if _process.mcp_states else {}
    return [
        Observation(1 if state == current else 0, {"server": server, "state": state})
        for server, current in states.items()
        for state in MCP_STATES
    ]


_GAUGES: tuple[tuple[str, Callable[[CallbackOptions], Iterable[Observation]], str, str], ...] = (
    (
        "effectgate_consumer_pending",
        CONSUMER_PENDING.observe,
        "{message}",
        "Messages not yet delivered or not yet acknowledged, per durable consumer.",
    ),
    ("effectgate_approvals_pending", APPROVALS_PENDING.observe, "{approval}", "Approvals waiting for a vote."),
    ("effectgate_approval_oldest_age", APPROVAL_OLDEST_AGE.observe, "s", "Age of the oldest pending approval."),
    ("effectgate_audit_lag", _audit_lag, "s", "Now minus the stream time of the last event the audit log appended."),
    ("effectgate_mcp_server_state", _mcp_state, "1", "1 for the state each MCP server is in, 0 for the others."),
    (
        "effectgate_record_store_used_ratio",
        RECORD_STORE_USED.observe,
        "1",
        "Share of the record stream's byte limit in use (none when it has no limit).",
    ),
)
"""The observable gauges: name, callback, unit, description."""


class Instruments:
    """Every effectgate instrument, created on ``meter``.

    Args:
        meter: the OpenTelemetry meter.
    """

    def __init__(self, meter: metrics.Meter) -> None:
        self.decisions = meter.create_counter(
            "effectgate_decisions", unit="{decision}", description="Decisions published, by verdict and reason code."
        )
        self.receipts = meter.create_counter(
            "effectgate_receipts", unit="{receipt}", description="Receipts published, by outcome."
        )
        self.rate_limited = meter.create_counter(
            "effectgate_rate_limit_rejections", unit="{call}", description="Calls denied rate_limited by the policy."
        )
        self.call = meter.create_histogram(
            "effectgate_call_duration",
            unit="s",
            description="Decision to receipt, from the event timestamps.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self.stage = meter.create_histogram(
            "effectgate_stage_duration",
            unit="s",
            description="Time spent in one stage: policy, approval, execution.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S,
        )
        self._gauges(meter)

    def _gauges(self, meter: metrics.Meter) -> None:
        for name, callback, unit, description in _GAUGES:
            meter.create_observable_gauge(name, [callback], unit=unit, description=description)


INSTRUMENTS = Instruments(metrics.get_meter("effectgate"))


def record_published(event: Any) -> None:
    """Count a decision or a receipt that was just stored (other events are not counted)."""
    if isinstance(event, DecisionMade):
        INSTRUMENTS.decisions.add(1, {"verdict": event.verdict.value, "reason_code": event.reason_code})
        if event.reason_code == "rate_limited":
            INSTRUMENTS.rate_limited.add(1)
    elif isinstance(event, ReceiptIssued):
        INSTRUMENTS.receipts.add(1, {"outcome": event.outcome.value})
        if event.duration_ms is not None:
            record_stage("execution", event.duration_ms / 1000)


def record_stage(stage: str, seconds: float) -> None:
    """Record ``seconds`` spent in ``stage`` (``policy``, ``approval``, ``execution``); negatives count as 0."""
    INSTRUMENTS.stage.record(max(0.0, seconds), {"stage": stage})


def record_call(decided_at: datetime, receipt_at: datetime) -> None:
    """Record one call's decision-to-receipt time."""
    INSTRUMENTS.call.record(max(0.0, (receipt_at - decided_at).total_seconds()))


def record_appended(stored_at: datetime) -> None:
    """Note the stream time of the event the audit log just appended (for ``effectgate_audit_lag``)."""
    _process.last_appended_s = stored_at.timestamp()


def observe_mcp_states(states: Callable[[], Mapping[str, str]]) -> None:
    """Report MCP server states from ``states()`` (server name → state); it must not do I/O."""
    _process.mcp_states = states


def install_meter_provider(service: str, otlp_endpoint: str | None) -> CollectorRegistry:
    """Set the process's meter provider; return the registry ``/metrics`` serves.

    Args:
        service: the ``service.name`` resource attribute (``effectgate-<service>``).
        otlp_endpoint: OTLP/HTTP base URL; metrics (with exemplars) are also pushed there when set.

    Only the first call of a process installs a provider (OpenTelemetry's global can be set
    once); later calls return the same registry.
    """
    from effectgate.shared.runtime.telemetry import meter_provider

    if _process.registry is None:
        _process.registry = CollectorRegistry()
        metrics.set_meter_provider(meter_provider(service, otlp_endpoint, _process.registry))
    return _process.registry


def record_pending_approvals(opened_at: Sequence[datetime], now: datetime) -> None:
    """Set the approvals gauges from when each pending approval opened."""
    APPROVALS_PENDING.replace({(): float(len(opened_at))})
    oldest = max(((now - opened).total_seconds() for opened in opened_at), default=0.0)
    APPROVAL_OLDEST_AGE.replace({(): max(0.0, oldest)})
