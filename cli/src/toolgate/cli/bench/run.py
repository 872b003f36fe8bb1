"""``toolgate bench``: one run on a stack of its own, every row at each concurrency asked for.

At each concurrency, in this order on the same nats-server and redis-server: the bare
request/reply, the transport floor (:mod:`toolgate.cli.bench.floors`), then the governed
call (:mod:`toolgate.cli.bench.governed`) with the CPU each process spent on it (read from
``/proc`` before and after, once every consumer of the record stream has handled the run:
audit and approvals included). Then the resident memory of every process, the stage
breakdown of the governed calls (:mod:`toolgate.cli.bench.stages`) and the in-process cost
of a policy decision and an argument validation.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import nats
from rich.console import Console

from toolgate.cli.bench import stages
from toolgate.cli.bench.figures import Figures, measure, warm_up
from toolgate.cli.bench.floors import admin_options, bare_call, floor_call, floor_stages, provision_floor
from toolgate.cli.bench.governed import AGENT, ClientTimes, bench_descriptor, governed_call, in_process_us, settled
from toolgate.cli.bench.processes import CpuPerCall, cpu_per_call, rss_mib, sample_cpu
from toolgate.cli.bench.report import Report, Row, print_report, report_json
from toolgate.cli.stack import DEPLOY_DIR, AuthMode, Stack, running_stack
from toolgate.contracts import catalog

__all__ = ["run_bench"]

Call = Callable[[], Awaitable[None]]


@dataclass
class _Session:
    """What a run holds: the stack, the processes to read and the three calls."""

    stack: Stack
    calls: int
    floor_pids: dict[str, int]
    bare: Call
    floor: Call
    governed: Call
    times: ClientTimes
    rows: list[Row] = field(default_factory=list)
    client_times: dict[int, ClientTimes] = field(default_factory=dict)


def _server_pids(stack: Stack) -> dict[str, int]:
    return {f"{name}-server": server.process.pid for name, server in stack.servers.items()}


def _service_pids(stack: Stack) -> dict[str, int]:
    return {name: process.pid for name, process in stack.processes.items()}


async def _with_cpu(
    pids: Mapping[str, int], run: Callable[[], Awaitable[Figures]], calls: int
) -> tuple[Figures, CpuPerCall]:
    before = sample_cpu(pids)
    figures = await run()
    return figures, cpu_per_call(before, sample_cpu(pids), calls)


async def _governed_run(session: _Session, concurrency: int) -> tuple[Figures, CpuPerCall, CpuPerCall]:
    """The governed run at ``concurrency``: its figures, the CPU per call of the stack, and of this client."""
    session.times.started.clear()
    session.times.received.clear()
    pids, client = {**_service_pids(session.stack), **_server_pids(session.stack)}, {"bench client": os.getpid()}
    before, client_before = sample_cpu(pids), sample_cpu(client)
    figures = await measure(session.governed, session.calls, concurrency)
    client_cpu = cpu_per_call(client_before, sample_cpu(client), session.calls)
    await settled(session.stack)
    session.client_times[concurrency] = ClientTimes(dict(session.times.started), dict(session.times.received))
    return figures, cpu_per_call(before, sample_cpu(pids), session.calls), client_cpu


async def _row(session: _Session, concurrency: int) -> Row:
    bare = await measure(session.bare, session.calls, concurrency)
    floor_pids = {**session.floor_pids, **_server_pids(session.stack)}
    floor, floor_cpu = await _with_cpu(
        floor_pids, lambda: measure(session.floor, session.calls, concurrency), session.calls
    )
    governed, governed_cpu, client_cpu = await _governed_run(session, concurrency)
    return Row(concurrency, bare, floor, governed, governed_cpu, floor_cpu, client_cpu)


def _rss(session: _Session) -> dict[str, float]:
    pids = {**_service_pids(session.stack), **_server_pids(session.stack), **session.floor_pids}
    return {name: rss_mib(pid) for name, pid in {**pids, "bench client": os.getpid()}.items()}


async def _stage_medians(session: _Session) -> dict[int, dict[str, float | None]]:
    logs = session.stack.state_dir / "logs"
    handlers = (
        stages.log_handler_ms(logs, "policy", catalog.POLICY_CONSUMER.durable),
        stages.log_handler_ms(logs, "executor", catalog.EXECUTOR_DECISIONS.durable),
    )
    nc = await nats.connect(session.stack.nats_url, **admin_options(session.stack))
    try:
        stamps = await stages.read_stamps(nc, AGENT)
    finally:
        await nc.close()
    medians = {}
    for concurrency, seen in session.client_times.items():
        calls = stages.call_times(seen.started, seen.received, stamps, handlers)
        medians[concurrency] = stages.stage_medians(calls)
    return medians


async def _measured(stack: Stack, calls: int, concurrencies: list[int], floor_pids: dict[str, int]) -> Report:
    times = ClientTimes()
    async with bare_call(stack) as bare, floor_call(stack) as floor, governed_call(stack, times) as governed:
        session = _Session(stack, calls, floor_pids, bare, floor, governed, times)
        for call in (bare, floor, governed):
            await warm_up(call)
        for concurrency in concurrencies:
            session.rows.append(await _row(session, concurrency))
        rss = _rss(session)
    decide_us, validate_us = in_process_us()
    return Report(calls, session.rows, rss, await _stage_medians(session), decide_us, validate_us)


async def _provision(stack: Stack) -> None:
    nc = await nats.connect(stack.nats_url, **admin_options(stack))
    try:
        await provision_floor(nc)
    finally:
        await nc.close()


def _prepared(root: Path) -> dict[str, str]:
    """A sandbox with ``data.txt`` and the shipped tools plus ``bench_fs`` under ``root``: the services' environment."""
    (root / "sandbox").mkdir()
    (root / "sandbox" / "data.txt").write_text("benchmark payload\n" * 8)
    tools = root / "tools"
    tools.mkdir()
    for shipped in (DEPLOY_DIR / "tools").glob("*.json"):
        (tools / shipped.name).write_bytes(shipped.read_bytes())
    (tools / "bench_fs.json").write_bytes(msgspec.json.encode(bench_descriptor()))
    return {"TOOLGATE_EXECUTOR_SANDBOX_ROOT": str(root / "sandbox"), "TOOLGATE_REGISTRY_DESCRIPTORS_DIR": str(tools)}


def run_bench(
    console: Console, calls: int, concurrencies: list[int], insecure: bool = False, as_json: bool = False
) -> int:
    """Run the benchmark (NATS secured unless ``insecure``) and print it; return the exit code.

    Args:
        console: where progress goes (and the tables, unless ``as_json``).
        calls: calls measured per row and concurrency.
        concurrencies: calls in flight, one run of every row at each.
        insecure: NATS without users (else secured, the bare call and the floor as ``admin``).
        as_json: print one JSON document on stdout instead of the tables.

    Raises:
        RuntimeError / TimeoutError: the stack or a floor stage did not start, or a governed call failed.
    """
    root = Path(tempfile.mkdtemp(prefix="toolgate-bench-"))
    auth: AuthMode = "open" if insecure else "secured"
    try:
        with contextlib.ExitStack() as resources:
            with console.status("starting the system…"):
                stack = resources.enter_context(
                    running_stack(root / "state", _prepared(root), auth=auth, admin=not insecure)
                )
                asyncio.run(_provision(stack))
                floor_pids = resources.enter_context(floor_stages(stack))
            console.print(f"{calls} calls per row at concurrency {', '.join(map(str, concurrencies))}")
            report = asyncio.run(_measured(stack, calls, concurrencies, floor_pids))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if as_json:
        report_json(report)
    else:
        print_report(console, report)
    return 0
