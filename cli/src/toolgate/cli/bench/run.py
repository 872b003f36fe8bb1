"""``toolgate bench``: one run on a stack of its own, every row at each concurrency asked for.

At each concurrency, in this order on the same nats-server and redis-server: the bare
request/reply, the transport floor (:mod:`toolgate.cli.bench.floors`), then the governed
call (:mod:`toolgate.cli.bench.governed`) with the CPU each process spent on it (read from
``/proc`` before and after, once every consumer of the record stream has handled the run:
audit and approvals included). Then the resident memory of every process, the stage
breakdown of the governed calls (:mod:`toolgate.cli.bench.stages`) and the in-process cost
of a policy decision and an argument validation.

With ``tools``, the registry is then grown to each size in turn (:mod:`toolgate.cli.bench.registry_size`)
and the governed call measured again at each concurrency. With ``rss_calls``, governed calls
are made until that many were made in all, before the resident memory is read (it is also
read once before the first call: idle).
"""

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

from toolgate.cli.bench import stages
from toolgate.cli.bench.figures import Figures, measure, warm_up
from toolgate.cli.bench.floors import admin_options, bare_call, floor_call, floor_stages, provision_floor
from toolgate.cli.bench.governed import (
    AGENT,
    ClientTimes,
    bench_descriptor,
    governed_call,
    in_process_us,
    many_rules_decision_us,
    settled,
)
from toolgate.cli.bench.processes import CpuPerCall, cpu_per_call, nats_messages, rss_mib, sample_cpu
from toolgate.cli.bench.registry_size import grow_registry
from toolgate.cli.bench.report import Report, Row, SizeRow, print_report, report_json
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
    governed_calls: int = 0

    async def counted(self) -> None:
        """One governed call, counted in :attr:`governed_calls`."""
        self.governed_calls += 1
        await self.governed()


def _server_pids(stack: Stack) -> dict[str, int]:
    return {f"{name}-server": server.process.pid for name, server in stack.servers.items()}


def _service_pids(stack: Stack) -> dict[str, int]:
    return {name: process.pid for name, process in stack.processes.items()}


async def _with_cpu(
    session: _Session, pids: Mapping[str, int], run: Callable[[], Awaitable[Figures]]
) -> tuple[Figures, CpuPerCall]:
    before, messages = sample_cpu(pids), _messages(session.stack)
    figures = await run()
    return figures, _counted(cpu_per_call(before, sample_cpu(pids), session.calls), session, messages)


def _messages(stack: Stack) -> int | None:
    """Messages through the stack's nats-server so far (:func:`nats_messages`)."""
    return nats_messages(stack.state_dir / "nats", stack.servers["nats"].process.pid)


def _counted(cpu: CpuPerCall, session: _Session, before: int | None) -> CpuPerCall:
    """``cpu`` with the nats-server messages per call since ``before``."""
    after = _messages(session.stack)
    per_call = None if before is None or after is None else (after - before) / session.calls
    return dataclasses.replace(cpu, nats_messages=per_call)


async def _governed_run(session: _Session, concurrency: int) -> tuple[Figures, CpuPerCall, CpuPerCall]:
    """The governed run at ``concurrency``: its figures, the CPU per call of the stack, and of this client."""
    session.times.started.clear()
    session.times.received.clear()
    pids, client = {**_service_pids(session.stack), **_server_pids(session.stack)}, {"bench client": os.getpid()}
    before, client_before, messages = sample_cpu(pids), sample_cpu(client), _messages(session.stack)
    figures = await measure(session.counted, session.calls, concurrency)
    client_cpu = cpu_per_call(client_before, sample_cpu(client), session.calls)
    await settled(session.stack)
    session.client_times[concurrency] = ClientTimes(dict(session.times.started), dict(session.times.received))
    return figures, _counted(cpu_per_call(before, sample_cpu(pids), session.calls), session, messages), client_cpu


async def _row(session: _Session, concurrency: int) -> Row:
    bare = await measure(session.bare, session.calls, concurrency)
    floor_pids = {**session.floor_pids, **_server_pids(session.stack)}
    floor, floor_cpu = await _with_cpu(session, floor_pids, lambda: measure(session.floor, session.calls, concurrency))
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
    pids = {**_service_pids(session.stack), **_server_pids(session.stack)}
    before, messages = sample_cpu(pids), _messages(session.stack)
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
        rss = await _rss_after(session, asked.rss_calls, max(asked.concurrencies))
    decide_us, validate_us = in_process_us()
    stages_ms = await _stage_medians(session)
    calls, made = asked.calls, session.governed_calls
    many = many_rules_decision_us()
    return Report(calls, session.rows, rss, stages_ms, decide_us, validate_us, sizes, idle, made, many)


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
    console: Console,
    calls: int,
    concurrencies: list[int],
    insecure: bool = False,
    as_json: bool = False,
    tools: list[int] | None = None,
    rss_calls: int = 0,
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

    Raises:
        RuntimeError / TimeoutError: the stack or a floor stage did not start, a governed call failed,
            or the registry refused a filler tool.
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
            asked = _Asked(calls, concurrencies, tools or [], rss_calls)
            report = asyncio.run(_measured(stack, asked, floor_pids))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if as_json:
        report_json(report)
    else:
        print_report(console, report)
    return 0
