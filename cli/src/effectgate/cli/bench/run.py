"""``effectgate bench``: one run on a stack of its own, every row at each concurrency asked for."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import nats
from rich.console import Console

from effectgate.cli.bench import stages
from effectgate.cli.bench.figures import Figures, measure, warm_up
from effectgate.cli.bench.flood import under_flood
from effectgate.cli.bench.floors import admin_options, bare_call, floor_call, floor_stages, provision_floor
from effectgate.cli.bench.governed import (
    AGENT,
    ClientTimes,
    bench_descriptor,
    governed_call,
    in_process_us,
    many_rules_decision_us,
    settled,
)
from effectgate.cli.bench.processes import CpuPerCall, cpu_per_call, rss_mib, sample_cpu
from effectgate.cli.bench.registry_size import grow_registry
from effectgate.cli.bench.report import Report, Row, SizeRow, print_report, report_json
from effectgate.cli.bench.topology import Topology, handler_ms, read_topology, server_pids, service_pids, stack_messages
from effectgate.cli.stack.clustered import checked_size
from effectgate.cli.stack.launch import DEPLOY_DIR, AuthMode, running_stack
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog

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
    governed_calls: int = 0

    async def counted(self) -> None:
        """One governed call, counted in :attr:`governed_calls`."""
        self.governed_calls += 1
        await self.governed()


async def _with_cpu(
    session: _Session, pids: Mapping[str, int], run: Callable[[], Awaitable[Figures]]
) -> tuple[Figures, CpuPerCall]:
    before, messages = sample_cpu(pids), stack_messages(session.stack)
    figures = await run()
    return figures, _counted(cpu_per_call(before, sample_cpu(pids), session.calls), session, messages)


def _counted(cpu: CpuPerCall, session: _Session, before: int | None) -> CpuPerCall:
    """``cpu`` with the nats-server messages per call since ``before``."""
    after = stack_messages(session.stack)
    per_call = None if before is None or after is None else (after - before) / session.calls
    return dataclasses.replace(cpu, nats_messages=per_call)


async def _governed_run(session: _Session, concurrency: int) -> tuple[Figures, CpuPerCall, CpuPerCall]:
    """The governed run at ``concurrency``: its figures, the CPU per call of the stack, and of this client."""
    session.times.started.clear()
    session.times.received.clear()
    pids, client = {**service_pids(session.stack), **server_pids(session.stack)}, {"bench client": os.getpid()}
    before, client_before, messages = sample_cpu(pids), sample_cpu(client), stack_messages(session.stack)
    figures = await measure(session.counted, session.calls, concurrency)
    client_cpu = cpu_per_call(client_before, sample_cpu(client), session.calls)
    await settled(session.stack)
    session.client_times[concurrency] = ClientTimes(dict(session.times.started), dict(session.times.received))
    return figures, _counted(cpu_per_call(before, sample_cpu(pids), session.calls), session, messages), client_cpu


async def _row(session: _Session, concurrency: int) -> Row:
    bare = await measure(session.bare, session.calls, concurrency)
    floor_pids = {**session.floor_pids, **server_pids(session.stack)}
    floor, floor_cpu = await _with_cpu(session, floor_pids, lambda: measure(session.floor, session.calls, concurrency))
    governed, governed_cpu, client_cpu = await _governed_run(session, concurrency)
    return Row(concurrency, bare, floor, governed, governed_cpu, floor_cpu, client_cpu)


def _rss(session: _Session) -> dict[str, float]:
    pids = {**service_pids(session.stack), **server_pids(session.stack), **session.floor_pids}
    return {name: rss_mib(pid) for name, pid in {**pids, "bench client": os.getpid()}.items()}


async def _stage_medians(session: _Session) -> dict[int, dict[str, float | None]]:
    handlers = (
        handler_ms(session.stack, "policy", catalog.POLICY_CONSUMER.durable),
        handler_ms(session.stack, "executor", catalog.EXECUTOR_DECISIONS.durable),
    )
    nc = await nats.connect(servers=session.stack.nats_servers, **admin_options(session.stack))
    try:
        stamps = await stages.read_stamps(nc, AGENT)
    finally:
        await nc.close()
    medians = {}
    for concurrency, seen in session.client_times.items():
        calls = stages.call_times(seen.started, seen.received, stamps, handlers)
        medians[concurrency] = stages.stage_medians(calls)
    return medians


async def _sizes(session: _Session, tools: list[int], concurrencies: list[int]) -> list[SizeRow]:
    """The governed call at each concurrency with the registry grown to each of ``tools``, smallest first."""
    sizes = []
    for size in sorted(set(tools)):
        registered, publish_s = await grow_registry(session.stack, size)
        runs = [await _sized_run(session, concurrency) for concurrency in concurrencies]
        sizes.append(SizeRow(registered, publish_s, [run for run, _ in runs], [cpu for _, cpu in runs]))
    return sizes


async def _sized_run(session: _Session, concurrency: int) -> tuple[Figures, CpuPerCall]:
    """The governed call at ``concurrency`` and the stack's CPU per call, read once every consumer handled it."""
    pids = {**service_pids(session.stack), **server_pids(session.stack)}
    before, messages = sample_cpu(pids), stack_messages(session.stack)
    figures = await measure(session.counted, session.calls, concurrency)
    await settled(session.stack)
    return figures, _counted(cpu_per_call(before, sample_cpu(pids), session.calls), session, messages)


async def _rss_after(session: _Session, rss_calls: int, concurrency: int) -> dict[str, float]:
    """Resident memory once ``rss_calls`` governed calls were made in all, and every consumer handled them."""
    if (missing := rss_calls - session.governed_calls) > 0:
        await measure(session.counted, missing, concurrency)
    await settled(session.stack)
    return _rss(session)


@dataclass(frozen=True)
class _Asked:
    """What a run was asked for beyond its rows: registry sizes and calls before the memory is read."""

    calls: int
    concurrencies: list[int]
    tools: list[int] = field(default_factory=list)
    rss_calls: int = 0
    flood: int = 0


async def _measured(stack: Stack, asked: _Asked, floor_pids: dict[str, int]) -> Report:
    times = ClientTimes()
    async with bare_call(stack) as bare, floor_call(stack) as floor, governed_call(stack, times) as governed:
        session = _Session(stack, asked.calls, floor_pids, bare, floor, governed, times)
        idle = _rss(session)
        for call in (bare, floor, session.counted):
            await warm_up(call)
        for concurrency in asked.concurrencies:
            session.rows.append(await _row(session, concurrency))
        sizes = await _sizes(session, asked.tools, asked.concurrencies)
        flood = await under_flood(stack, asked.flood, governed) if asked.flood else None
        rss = await _rss_after(session, asked.rss_calls, max(asked.concurrencies))
    decide_us, validate_us = in_process_us()
    stages_ms = await _stage_medians(session)
    calls, made = asked.calls, session.governed_calls
    many = many_rules_decision_us()
    return Report(calls, session.rows, rss, stages_ms, decide_us, validate_us, sizes, idle, made, many, flood)


async def _provision(stack: Stack) -> Topology:
    """Provision the transport floor; return what the stack runs on."""
    nc = await nats.connect(servers=stack.nats_servers, **admin_options(stack))
    try:
        await provision_floor(nc)
        return await read_topology(stack, nc)
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
    return {
        "EFFECTGATE_EXECUTOR_SANDBOX_ROOT": str(root / "sandbox"),
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools),
    }


def run_bench(
    console: Console,
    calls: int,
    concurrencies: list[int],
    insecure: bool = False,
    as_json: bool = False,
    tools: list[int] | None = None,
    rss_calls: int = 0,
    flood: int = 0,
    cluster: int = 1,
    replicas: int | None = None,
) -> int:
    """Run the benchmark (NATS secured unless ``insecure``) and print it; return the exit code.

    Args:
        console: where progress goes (and the tables, unless ``as_json``).
        calls: calls measured per row and concurrency.
        concurrencies: calls in flight, one run of every row at each.
        insecure: NATS without users (else secured, the bare call and the floor as ``admin``).
        as_json: print one JSON document on stdout instead of the tables.
        tools: registry sizes (tools registered in all) to measure the governed call at, besides the rows.
        rss_calls: governed calls made in all (at the highest concurrency) before the memory is read.
        flood: requests another principal floods with while the governed call is timed (0: none;
            :mod:`effectgate.cli.bench.flood`).
        cluster: NATS nodes (1, 3 or 5; :func:`effectgate.cli.stack.clustered.checked_size`), the
            streams and buckets at that many replicas.
        replicas: processes of each service (default: 2 on a cluster, else 1).

    Raises:
        ClusterSizeInvalid: ``cluster`` is not 1, 3 or 5; ValueError: ``replicas`` below 1.
        RuntimeError / TimeoutError: the stack or a floor stage did not start, a governed call failed,
            or the registry refused a filler tool.
    """
    checked_size(cluster)
    root = Path(tempfile.mkdtemp(prefix="effectgate-bench-"))
    auth: AuthMode = "open" if insecure else "secured"
    try:
        with contextlib.ExitStack() as resources:
            with console.status("starting the system…"):
                started = running_stack(
                    root / "state", _prepared(root), auth=auth, admin=not insecure, cluster=cluster, replicas=replicas
                )
                stack = resources.enter_context(started)
                topology = asyncio.run(_provision(stack))
                floor_pids = resources.enter_context(floor_stages(stack))
            console.print(f"{calls} calls per row at concurrency {', '.join(map(str, concurrencies))}")
            asked = _Asked(calls, concurrencies, tools or [], rss_calls, flood)
            report = dataclasses.replace(asyncio.run(_measured(stack, asked, floor_pids)), topology=topology)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if as_json:
        report_json(report)
    else:
        print_report(console, report)
    return 0
