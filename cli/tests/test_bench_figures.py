"""The bench's arithmetic: percentiles, ratios, CPU and memory from /proc text, stage medians, log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.cli.bench.figures import Figures, figures_of, percentile, ratios, scaling
from effectgate.cli.bench.processes import CpuPerCall, cpu_per_call, cpu_ticks, parse_rss_kib, parse_stat_ticks, rss_mib
from effectgate.cli.bench.report import Report, SizeRow, report_dict
from effectgate.cli.bench.stages import STAGES, CallTimes, Stamp, call_times, handler_ms, stage_medians

STAT = (
    "4242 (python -m (effectgate)) S 1 4242 4242 0 -1 4194560 9123 0 0 0 "
    "1500 320 0 0 20 0 3 0 652798 3133440 402 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
)
"""A stat line whose command name holds spaces and parentheses; utime 1500, stime 320."""

STATUS = "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  300000 kB\nVmRSS:\t  104448 kB\nThreads:\t3\n"


def test_percentiles_interpolate_between_order_statistics() -> None:
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 25) == 2.0
    assert percentile([1.0, 2.0], 50) == pytest.approx(1.5)
    assert percentile([10.0, 20.0], 99) == pytest.approx(19.9)
    assert percentile([7.0], 99) == 7.0


@pytest.mark.parametrize(("values", "q"), [([], 50), ([1.0], -1), ([1.0], 101)])
def test_a_percentile_of_nothing_or_out_of_range_is_refused(values: list[float], q: float) -> None:
    with pytest.raises(ValueError):
        percentile(values, q)


def test_figures_of_a_run_are_its_percentiles_and_its_rate() -> None:
    run = figures_of([float(ms) for ms in range(1, 101)], wall_s=2.0, concurrency=8)
    assert (run.concurrency, run.calls) == (8, 100)
    assert run.p50_ms == pytest.approx(50.5)
    assert run.p99_ms == pytest.approx(99.01)
    assert run.calls_per_s == 50.0


def test_ratios_put_the_governed_p99_over_the_other_p50() -> None:
    governed = Figures(concurrency=8, calls=100, p50_ms=6.0, p99_ms=20.0, calls_per_s=300.0)
    bare = Figures(concurrency=8, calls=100, p50_ms=0.2, p99_ms=0.5, calls_per_s=15_000.0)
    against = ratios(governed, bare)
    assert against.p50 == pytest.approx(30.0)
    assert against.p99_over_p50 == pytest.approx(100.0)
    assert against.throughput == pytest.approx(0.02)


def test_a_larger_registry_is_put_against_the_smallest_figure_for_figure() -> None:
    small = Figures(concurrency=8, calls=100, p50_ms=6.0, p99_ms=20.0, calls_per_s=300.0)
    large = Figures(concurrency=8, calls=100, p50_ms=7.5, p99_ms=30.0, calls_per_s=240.0)
    against = scaling(large, small)
    assert (against.p50, against.p99, against.throughput) == pytest.approx((1.25, 1.5, 0.8))


def test_the_sweep_rows_of_a_report_each_name_their_size_and_ratios_per_concurrency() -> None:
    def runs(p50_ms: float) -> list[Figures]:
        return [Figures(concurrency, 100, p50_ms * concurrency, 40.0, 1000.0 / p50_ms) for concurrency in (8, 64)]

    cpu = [CpuPerCall({"policy": 900.0}, 900.0, 10.0)] * 2
    sizes = [SizeRow(10, 0.1, runs(4.0), cpu), SizeRow(10_000, 30.0, runs(5.0), cpu)]
    report = Report(100, [], {"policy": 90.0}, {}, 60.0, 2.0, sizes, {"policy": 80.0}, 10_020)
    document = report_dict(report)
    assert [size["tools"] for size in document["registry_sweep"]] == [10, 10_000]
    smallest, largest = document["registry_sweep"]
    assert smallest["vs_smallest"] == [{"p50": 1.0, "p99": 1.0, "throughput": 1.0}] * 2
    assert [ratio["p50"] for ratio in largest["vs_smallest"]] == pytest.approx([1.25, 1.25])
    assert [ratio["throughput"] for ratio in largest["vs_smallest"]] == pytest.approx([0.8, 0.8])
    assert [run["concurrency"] for run in largest["governed"]] == [8, 64]
    assert [cpu["total_us"] for cpu in largest["cpu_per_governed_call"]] == [900.0, 900.0]
    assert (document["rss_idle_mib"], document["rss_after_governed_calls"]) == ({"policy": 80.0}, 10_020)


def test_cpu_ticks_are_user_plus_system_after_the_command_name() -> None:
    assert parse_stat_ticks(STAT) == 1820


def test_a_text_that_is_not_a_stat_line_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_stat_ticks("4242 (python) S 1 2")


def test_resident_memory_is_the_vmrss_line() -> None:
    assert parse_rss_kib(STATUS) == 104448
    with pytest.raises(ValueError):
        parse_rss_kib("Name:\tkthreadd\nState:\tS (sleeping)\n")


def test_a_process_is_read_from_its_proc_directory(tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(STAT + "\n")
    (tmp_path / "4242" / "status").write_text(STATUS)
    assert cpu_ticks(4242, tmp_path) == 1820
    assert rss_mib(4242, tmp_path) == 102.0


def test_cpu_per_call_spreads_each_process_ticks_over_the_calls() -> None:
    before = {"policy": 1000, "nats-server": 500, "gone": 7}
    after = {"policy": 1100, "nats-server": 530}
    spent = cpu_per_call(before, after, calls=1000, ticks_per_s=100)
    assert spent.per_process_us == {"policy": pytest.approx(1000.0), "nats-server": pytest.approx(300.0)}
    assert spent.total_us == pytest.approx(1300.0)
    assert spent.resolution_us == pytest.approx(10.0)


def test_handler_times_come_from_the_consumer_request_lines_text_or_json() -> None:
    lines = [
        "2026-12-01T08:08:10.053Z policy INFO decision request_id=r1 verdict=execute consumer=policy-requests"
        " duration_ms=12.9",
        "2026-12-01T08:08:10.054Z policy INFO decision request_id=r2 consumer=policy-receipts duration_ms=1.0",
        '{"message": "decision", "request_id": "r3", "consumer": "policy-requests", "duration_ms": 2.5}',
        "{not json",
        "2026-12-01T08:08:10.055Z policy WARNING something else",
    ]
    assert handler_ms(lines, "policy-requests") == {"r1": 12.9, "r3": 2.5}


def _call(offset_s: float, policy_ms: float | None) -> CallTimes:
    at = 1000.0 + offset_s
    return CallTimes(
        started=at,
        request=Stamp(at + 0.001, at + 0.002),
        decision=Stamp(at + 0.004, at + 0.007),
        receipt=Stamp(at + 0.010, at + 0.011, duration_ms=0.5),
        received=at + 0.012,
        policy_handler_ms=policy_ms,
        executor_handler_ms=None,
    )


def test_stage_medians_take_each_gap_between_the_recorded_times() -> None:
    medians = stage_medians([_call(0, 4.0), _call(1, 6.0), _call(2, None)])
    assert list(medians) == [name for name, _ in STAGES]
    assert medians["call → request made"] == pytest.approx(1.0)
    assert medians["request stored → policy decides"] == pytest.approx(2.0)
    assert medians["policy decides → decision stored"] == pytest.approx(3.0)
    assert medians["request → decision"] == pytest.approx(6.0)
    assert medians["decision → receipt"] == pytest.approx(4.0)
    assert medians["receipt → client"] == pytest.approx(1.0)
    assert medians["whole call"] == pytest.approx(12.0)
    assert medians["policy handler"] == 5.0
    assert medians["executor handler"] is None
    assert medians["tool ran"] == 0.5


def test_only_calls_with_all_three_events_read_back_are_broken_down() -> None:
    stamp = Stamp(1.0, 2.0)
    stamps = {"request": {"a": stamp, "b": stamp}, "decision": {"a": stamp, "b": stamp}, "receipt": {"a": stamp}}
    found = call_times({"a": 0.5, "b": 0.5}, {"a": 3.0, "b": 3.0}, stamps, ({"a": 1.5}, {}))
    assert [(call.started, call.received, call.policy_handler_ms) for call in found] == [(0.5, 3.0, 1.5)]
