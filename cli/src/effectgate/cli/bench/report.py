"""What ``effectgate bench`` prints: rich tables for people, one JSON document (``--json``) for machines."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from effectgate.cli.bench.figures import Figures, Ratios, Scaling, ratios, scaling
from effectgate.cli.bench.flood import FloodFigures
from effectgate.cli.bench.processes import CpuPerCall
from effectgate.cli.bench.stages import STAGES
from effectgate.cli.bench.topology import Topology
from effectgate.cli.render.output import print_json

__all__ = ["Report", "Row", "SizeRow", "print_report", "report_dict", "report_json", "topology_line"]

KINDS = ("bare", "floor", "governed")
TITLES = {"bare": "bare request/reply", "floor": "transport floor", "governed": "governed READ_ONLY call"}


@dataclass(frozen=True)
class Row:
    """Everything measured at one concurrency.

    Attributes:
        governed_cpu: CPU per governed call of each stack process (services, nats-server, redis-server).
        floor_cpu: CPU per floor call of each floor stage, nats-server and redis-server.
        client_cpu: CPU per governed call of the bench process (the agent), kept out of the stack's total.
    """

    concurrency: int
    bare: Figures
    floor: Figures
    governed: Figures
    governed_cpu: CpuPerCall
    floor_cpu: CpuPerCall
    client_cpu: CpuPerCall

    @property
    def vs_bare(self) -> Ratios:
        """The governed call against the bare request/reply."""
        return ratios(self.governed, self.bare)

    @property
    def vs_floor(self) -> Ratios:
        """The governed call against the transport floor."""
        return ratios(self.governed, self.floor)


@dataclass(frozen=True)
class SizeRow:
    """The governed call with the registry grown to one size (``--tools``).

    Attributes:
        tools: tools registered during the runs (shipped, ``bench_fs`` and fillers).
        publish_s: seconds the fillers added for this size took to publish (the settling wait left out).
        runs: the governed call's figures, one per concurrency (in the order asked).
        cpu: the stack's CPU per governed call of each run (read after every consumer handled it).
    """

    tools: int
    publish_s: float
    runs: list[Figures]
    cpu: list[CpuPerCall]


@dataclass(frozen=True)
class Report:
    """A whole run.

    Attributes:
        calls: calls per row and concurrency.
        rss_mib: ``{process: resident memory after the runs, MiB}``.
        stages_ms: ``{concurrency: {stage: median ms, or None}}`` (:data:`effectgate.cli.bench.stages.STAGES`).
        policy_decision_us / argument_validation_us: in-process costs, µs.
        sizes: the registry sweep, smallest registry first (empty without ``--tools``).
        rss_idle_mib: ``{process: resident memory before the first call, MiB}``.
        governed_calls: governed calls made before ``rss_mib`` was read (warm-ups included).
        policy_decision_1000_rules_us: a policy decision with 1,000 rules more, µs
            (:func:`effectgate.cli.bench.governed.many_rules_decision_us`).
        flood: the governed call under another principal's flood (``None`` without ``--flood``).
        topology: the NATS nodes, record stream replicas and service processes measured on.
    """

    calls: int
    rows: list[Row]
    rss_mib: dict[str, float]
    stages_ms: dict[int, dict[str, float | None]]
    policy_decision_us: float
    argument_validation_us: float
    sizes: list[SizeRow] = dataclasses.field(default_factory=list)
    rss_idle_mib: dict[str, float] = dataclasses.field(default_factory=dict)
    governed_calls: int = 0
    policy_decision_1000_rules_us: float | None = None
    flood: FloodFigures | None = None
    topology: Topology | None = None

    def against_smallest(self, size: SizeRow) -> list[Scaling]:
        """Each run of ``size`` against the smallest registry's run at the same concurrency."""
        return [scaling(run, smallest) for run, smallest in zip(size.runs, self.sizes[0].runs, strict=True)]


def _cpu(cpu: CpuPerCall) -> dict[str, Any]:
    return {
        "per_process_us": cpu.per_process_us,
        "total_us": cpu.total_us,
        "resolution_us": cpu.resolution_us,
        "nats_messages": cpu.nats_messages,
    }


def _row(row: Row, stages_ms: dict[str, float | None]) -> dict[str, Any]:
    figures = {kind: dataclasses.asdict(getattr(row, kind)) for kind in KINDS}
    return {
        **figures,
        "governed_vs_bare": dataclasses.asdict(row.vs_bare),
        "governed_vs_floor": dataclasses.asdict(row.vs_floor),
        "cpu_per_governed_call": {**_cpu(row.governed_cpu), "client_us": row.client_cpu.total_us},
        "cpu_per_floor_call": _cpu(row.floor_cpu),
        "stages_ms": stages_ms,
    }


def _size(report: Report, size: SizeRow) -> dict[str, Any]:
    return {
        "tools": size.tools,
        "publish_s": size.publish_s,
        "governed": [dataclasses.asdict(run) for run in size.runs],
        "cpu_per_governed_call": [_cpu(cpu) for cpu in size.cpu],
        "vs_smallest": [dataclasses.asdict(ratio) for ratio in report.against_smallest(size)],
    }


def report_dict(report: Report) -> dict[str, Any]:
    """The whole report as JSON-ready values: one entry per concurrency in ``runs``."""
    return {
        "calls": report.calls,
        "topology": None if report.topology is None else dataclasses.asdict(report.topology),
        "runs": [_row(row, report.stages_ms.get(row.concurrency, {})) for row in report.rows],
        "rss_mib": report.rss_mib,
        "rss_idle_mib": report.rss_idle_mib,
        "rss_after_governed_calls": report.governed_calls,
        "registry_sweep": [_size(report, size) for size in report.sizes],
        "under_flood": None if report.flood is None else dataclasses.asdict(report.flood),
        "in_process_us": {
            "policy_decision": report.policy_decision_us,
            "policy_decision_1000_rules": report.policy_decision_1000_rules_us,
            "argument_validation": report.argument_validation_us,
        },
    }


def report_json(report: Report) -> None:
    """Print :func:`report_dict` as one JSON document on stdout."""
    print_json(report_dict(report))


def _figures_table(report: Report) -> Table:
    table = Table(title="latency and throughput (same servers, same run)")
    for column in ("in flight", "call", "p50", "p99", "throughput"):
        table.add_column(column, justify="right")
    for row in report.rows:
        for kind in KINDS:
            figures: Figures = getattr(row, kind)
            p50, p99, rate = f"{figures.p50_ms:.3f} ms", f"{figures.p99_ms:.3f} ms", f"{figures.calls_per_s:,.0f}/s"
            table.add_row(str(row.concurrency), TITLES[kind], p50, p99, rate)
        table.add_section()
    return table


def _ratios_table(report: Report) -> Table:
    table = Table(title="governed call as a ratio")
    for column in ("in flight", "against", "p50 / p50", "p99 / p50", "throughput / throughput"):
        table.add_column(column, justify="right")
    for row in report.rows:
        for against, ratio in (("bare", row.vs_bare), ("floor", row.vs_floor)):
            cells = (f"{ratio.p50:.1f}×", f"{ratio.p99_over_p50:.1f}×", f"{ratio.throughput:.3f}×")
            table.add_row(str(row.concurrency), TITLES[against], *cells)
    return table


def _cpu_table(report: Report) -> Table:
    table = Table(title="CPU per call, µs (user + system, from /proc)")
    table.add_column("process")
    for row in report.rows:
        table.add_column(f"governed @{row.concurrency}", justify="right")
    for row in report.rows:
        table.add_column(f"floor @{row.concurrency}", justify="right")
    names = dict.fromkeys(name for row in report.rows for name in row.governed_cpu.per_process_us)
    names.update(dict.fromkeys(name for row in report.rows for name in row.floor_cpu.per_process_us))
    cpus = [row.governed_cpu for row in report.rows] + [row.floor_cpu for row in report.rows]
    for name in names:
        table.add_row(name, *(_us(cpu.per_process_us.get(name)) for cpu in cpus))
    table.add_section()
    table.add_row("total (stack)", *(_us(cpu.total_us) for cpu in cpus))
    client = [_us(row.client_cpu.total_us) for row in report.rows]
    table.add_row("bench client (the agent)", *client, *("" for _ in report.rows))
    table.add_row("one tick per call", *(_us(cpu.resolution_us) for cpu in cpus))
    table.add_section()
    table.add_row("nats-server messages per call (in + out, every node)", *(_count(cpu.nats_messages) for cpu in cpus))
    return table


def _count(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def _us(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _stages_table(report: Report) -> Table:
    table = Table(title="governed call by stage, median ms (event, stream and request-line timestamps)")
    table.add_column("stage")
    for row in report.rows:
        table.add_column(f"@{row.concurrency}", justify="right")
    table.add_column("holds")
    for name, holds in STAGES:
        cells = [report.stages_ms.get(row.concurrency, {}).get(name) for row in report.rows]
        table.add_row(name, *("–" if cell is None else f"{cell:.3f}" for cell in cells), holds)
    return table


def _sizes_table(report: Report) -> Table:
    table = Table(title="governed call by registry size (against the smallest registry, same in-flight)")
    columns = ("tools", "in flight", "p50 ms", "p99 ms", "calls per s", "CPU µs per call", "p50 ×", "p99 ×", "rate ×")
    for column in columns:  # the units in the headers: nine columns of bare figures fit in 80 columns
        table.add_column(column, justify="right")
    for size in report.sizes:
        for run, cpu, ratio in zip(size.runs, size.cpu, report.against_smallest(size), strict=True):
            figures = (f"{run.p50_ms:.3f}", f"{run.p99_ms:.3f}", f"{run.calls_per_s:,.0f}")
            cells = (_us(cpu.total_us), f"{ratio.p50:.2f}", f"{ratio.p99:.2f}", f"{ratio.throughput:.2f}")
            table.add_row(f"{size.tools:,}", str(run.concurrency), *figures, *cells)
        table.add_section()
    return table


def _rss_table(report: Report) -> Table:
    table = Table(title=f"resident memory, idle and after {report.governed_calls:,} governed calls")
    for column in ("process", "idle", "after"):
        table.add_column(column, justify="right" if column != "process" else "left")
    for name, mib in report.rss_mib.items():
        idle = report.rss_idle_mib.get(name)
        table.add_row(name, "" if idle is None else f"{idle:.1f} MiB", f"{mib:.1f} MiB")
    return table


def topology_line(shape: Topology) -> str:
    """``on a 3-node NATS cluster, the record stream at 3 replicas, 2 processes of each service``."""
    nodes = "one nats-server" if shape.nodes == 1 else f"a {shape.nodes}-node NATS cluster"
    stream = f"{shape.stream_replicas} replica{'s' if shape.stream_replicas > 1 else ''}"
    each = f"{shape.service_replicas} process{'es' if shape.service_replicas > 1 else ''} of each service"
    return f"on {nodes}, the record stream at {stream}, {each}"


def print_report(console: Console, report: Report) -> None:
    """Print every table of ``report`` on ``console`` (first the topology it was measured on)."""
    if report.topology is not None:
        console.print(topology_line(report.topology))
    for table in (_figures_table, _ratios_table, _cpu_table, _stages_table, _rss_table):
        console.print(table(report))
    if report.sizes:
        console.print(_sizes_table(report))
    if (flood := report.flood) is not None:
        console.print(
            f"under a flood of {flood.flood} requests by another principal (submitted in {flood.submit_s:.1f} s, "
            f"handled in {flood.drained_s:.1f} s): governed call p50 {flood.p50_ms:.1f} ms, "
            f"p95 {flood.p95_ms:.1f} ms, max {flood.max_ms:.1f} ms"
        )
    decide, validate = report.policy_decision_us, report.argument_validation_us
    console.print(f"in-process: policy decision {decide:.1f} µs, argument validation {validate:.2f} µs")
    if (many := report.policy_decision_1000_rules_us) is not None:
        console.print(f"in-process: policy decision with 1,000 rules {many:.1f} µs")
