"""``effectgate bench --json`` on a stack it starts: every row, ratio, process and stage is in the document.

Structure only: a benchmark is never a timed test, so no figure is compared with a bound.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.bench.stages import STAGES
from effectgate.cli.stack.launch import SERVICES

pytestmark = [pytest.mark.connected, pytest.mark.e2e]

FIGURES = {"concurrency", "calls", "p50_ms", "p99_ms", "calls_per_s"}
RATIOS = {"p50", "p99_over_p50", "throughput"}
SERVERS = {"nats-server", "redis-server"}
FLOOR_STAGES = {"floor-first", "floor-second"}


def test_one_run_reports_every_row_at_each_concurrency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NATS_URL", raising=False)  # the bench starts its own secured nats-server and Redis
    monkeypatch.delenv("REDIS_URL", raising=False)
    sweep = ["--tools", "4", "--tools", "3", "--rss-calls", "150", "--flood", "200"]
    done = CliRunner().invoke(app, ["bench", "--calls", "20", "--concurrency", "2", "--json", *sweep])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["calls"] == 20
    (run,) = report["runs"]
    for kind in ("bare", "floor", "governed"):
        assert set(run[kind]) == FIGURES
        assert (run[kind]["concurrency"], run[kind]["calls"]) == (2, 20)
        assert run[kind]["calls_per_s"] > 0
    assert set(run["governed_vs_bare"]) == set(run["governed_vs_floor"]) == RATIOS
    governed_cpu, floor_cpu = run["cpu_per_governed_call"], run["cpu_per_floor_call"]
    assert set(governed_cpu["per_process_us"]) == {*SERVICES, *SERVERS}
    assert governed_cpu["total_us"] == pytest.approx(sum(governed_cpu["per_process_us"].values()))
    assert governed_cpu["total_us"] > 0 and governed_cpu["client_us"] >= 0
    assert set(floor_cpu["per_process_us"]) == {*FLOOR_STAGES, *SERVERS}
    # each call goes through nats-server: a request, its events, their deliveries and acks
    assert governed_cpu["nats_messages"] > floor_cpu["nats_messages"] > 2
    assert list(run["stages_ms"]) == [name for name, _ in STAGES]
    assert all(value is not None for value in run["stages_ms"].values())
    assert set(report["rss_mib"]) == {*SERVICES, *SERVERS, *FLOOR_STAGES, "bench client"}
    assert all(mib > 0 for mib in report["rss_mib"].values())
    assert set(report["in_process_us"]) == {"policy_decision", "policy_decision_1000_rules", "argument_validation"}
    assert set(report["rss_idle_mib"]) == set(report["rss_mib"])
    assert report["rss_after_governed_calls"] >= 150
    _check_sweep(report["registry_sweep"])
    flood = report["under_flood"]
    assert set(flood) == {"flood", "submit_s", "drained_s", "p50_ms", "p95_ms", "max_ms"}
    assert flood["flood"] == 200 and 0 < flood["p50_ms"] <= flood["p95_ms"] <= flood["max_ms"]


def _check_sweep(sweep: list[dict[str, object]]) -> None:
    """Smallest registry first (the bench and the shipped tool make 2: one filler, then two)."""
    assert [size["tools"] for size in sweep] == [3, 4]
    for size in sweep:
        assert set(size) == {"tools", "publish_s", "governed", "cpu_per_governed_call", "vs_smallest"}
        (governed,) = size["governed"]  # type: ignore[misc]
        assert set(governed) == FIGURES and (governed["concurrency"], governed["calls"]) == (2, 20)
        assert set(size["vs_smallest"][0]) == {"p50", "p99", "throughput"}  # type: ignore[index]
    assert sweep[0]["vs_smallest"] == [{"p50": 1.0, "p99": 1.0, "throughput": 1.0}]


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--calls", "0"], "--calls"),
        (["--concurrency", "0"], "--concurrency"),
        (["--tools", "0"], "--tools"),
        (["--rss-calls", "-1"], "--rss-calls"),
        (["--flood", "-1"], "--flood"),
        (["--calls", "many"], "--calls"),
    ],
)
def test_a_bench_asked_for_nothing_measurable_is_refused_naming_the_option(argv: list[str], named: str) -> None:
    done = CliRunner().invoke(app, ["bench", *argv])
    assert done.exit_code == 2, done.output
    assert named in done.output and "Traceback" not in done.output


def test_a_run_on_a_cluster_states_its_topology_and_counts_every_node(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NATS_URL", raising=False)  # a cluster stack starts its own servers
    monkeypatch.delenv("REDIS_URL", raising=False)
    argv = ["bench", "--cluster", "3", "--replicas", "1", "--calls", "10", "--concurrency", "2", "--json"]
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["topology"] == {"nodes": 3, "stream_replicas": 3, "service_replicas": 1}
    (run,) = report["runs"]
    assert run["governed"]["calls"] == 10 and run["governed"]["calls_per_s"] > 0
    processes = set(run["cpu_per_governed_call"]["per_process_us"])
    assert {"nats-n1-server", "nats-n2-server", "nats-n3-server", "sentinel-1-server"} <= processes
    assert {*SERVICES} <= processes and "policy-2" not in processes
    assert run["cpu_per_governed_call"]["nats_messages"] > 2  # summed over the three nodes
    assert run["stages_ms"]["policy handler"] is not None and run["stages_ms"]["whole call"] is not None
