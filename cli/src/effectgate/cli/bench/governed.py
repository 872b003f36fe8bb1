"""The governed call: a READ_ONLY ``bench_fs.read`` through policy and executor, as an agent makes it.

Every call is a :class:`~effectgate.sdk.ToolClient` ``submit`` and ``receipt``; the client
notes, per request id, when the call started and when it had its receipt (wall clock), for
the stage breakdown (:mod:`effectgate.cli.bench.stages`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
import nats
from nats.aio.client import Client

from effectgate.cli.bench.floors import admin_options
from effectgate.cli.stack.launch import DEPLOY_DIR
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.sdk import ToolClient

__all__ = [
    "AGENT",
    "TOOL",
    "ClientTimes",
    "bench_descriptor",
    "governed_call",
    "in_process_us",
    "many_rules_decision_us",
    "settled",
]

AGENT = "bench-agent"
TOOL = "bench_fs"

BYSTANDERS = (
    catalog.POLICY_CONSUMER,
    catalog.EXECUTOR_DECISIONS,
    catalog.APPROVALS_CONSUMER,
    catalog.AUDIT_CONSUMER,
    catalog.POLICY_RECEIPTS,
)
"""Consumers whose every message of a run is handled before its CPU is read (the backstop's only delivered)."""

SETTLE_TIMEOUT_S = 60.0


@dataclass
class ClientTimes:
    """What the client saw of each governed call, wall clock (seconds since the epoch).

    Attributes:
        started: ``{request id: when the call began}`` (before the SDK looks up the descriptor).
        received: ``{request id: when the client had the verified receipt}``.
    """

    started: dict[str, float] = field(default_factory=dict)
    received: dict[str, float] = field(default_factory=dict)


def bench_descriptor() -> ToolDescriptor:
    """``file_system`` reduced to its READ_ONLY ``read``, named ``bench_fs``, with a rate limit no run reaches."""
    base = msgspec.json.decode((DEPLOY_DIR / "tools" / "file_system.json").read_bytes(), type=ToolDescriptor)
    return msgspec.structs.replace(
        base,
        name=TOOL,
        version="1.0.0",
        operations={"read": base.operations["read"]},
        rate_limit=msgspec.structs.replace(base.rate_limit, calls=1_000_000, period_s=1.0),
    )


@contextlib.asynccontextmanager
async def governed_call(stack: Stack, times: ClientTimes) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """One governed call as ``bench-agent`` (noting its times in ``times``), while inside.

    Raises:
        RuntimeError: a call did not succeed (its outcome and reason are named).
        TimeoutError: no receipt within 60 s.
    """
    options = stack.connect_options(agent_user(AGENT))
    async with await ToolClient.connect(stack.nats_url, AGENT, public_keys=stack.public_keys, **options) as agent:

        async def call() -> None:
            request_id, started = uuid.uuid4().hex, time.time()
            times.started[request_id] = started
            await agent.submit(TOOL, "read", {"path": "data.txt"}, idempotency_key=request_id, request_id=request_id)
            receipt = await agent.receipt(request_id)
            times.received[request_id] = time.time()
            if receipt.outcome.value != "succeeded":
                raise RuntimeError(f"governed call ended {receipt.outcome.value}: {receipt.reason}")

        yield call


async def settled(stack: Stack, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until every :data:`BYSTANDERS` consumer handled all it was given, and the backstop saw everything.

    Raises:
        TimeoutError: still busy after ``timeout_s`` seconds.
    """
    nc = await nats.connect(servers=stack.nats_servers, **admin_options(stack))
    try:
        async with asyncio.timeout(timeout_s):
            while True:  # nothing signals it: consumer info is polled
                if await _quiet(nc):
                    return
                await asyncio.sleep(0.05)
    finally:
        await nc.close()


async def _quiet(nc: Client) -> bool:
    js = nc.jetstream()
    for spec in BYSTANDERS:
        info = await js.consumer_info(catalog.STREAM, spec.durable)
        if info.num_pending or info.num_ack_pending:
            return False
    backstop = await js.consumer_info(catalog.STREAM, catalog.BACKSTOP_CONSUMER.durable)
    return not backstop.num_pending


def in_process_us(rounds: int = 2000) -> tuple[float, float]:
    """In-process cost of one policy decision and one argument validation of the governed call, µs each.

    The shipped policy (``deploy/policy``) with the bench's descriptor; mean over ``rounds`` rounds.
    """
    from effectgate.contracts.tools.schemas import first_error
    from effectgate.policy.cedar.loading import load_policy

    policy, descriptor, arguments = DEPLOY_DIR / "policy", bench_descriptor(), {"path": "data.txt"}
    engine = load_policy(policy / "policy.cedar", policy / "principals.toml", policy / "attributes.toml", [descriptor])
    started = time.perf_counter()
    for _ in range(rounds):
        engine.decide(AGENT, descriptor, "read", arguments)
    decide_us = (time.perf_counter() - started) / rounds * 1e6
    schema, started = descriptor.operations["read"].input_schema, time.perf_counter()
    for _ in range(rounds):
        first_error(schema, arguments)
    return decide_us, (time.perf_counter() - started) / rounds * 1e6


def _rule(n: int) -> str:
    """Rule ``n`` of the many-rules policy: one in a hundred on the bench tool, each other one on a tool of its own."""
    tool, effect = (TOOL if n % 100 == 0 else f"tool_{n}"), ("forbid" if n % 2 else "permit")
    return (
        f'@id("rule-{n}")\n{effect}(principal, action == Action::"execute", resource == Tool::"{tool}")\n'
        f"when {{ context.risk_rank >= {n % 4} && principal.autonomy >= {n % 3} }};\n"
    )


def many_rules_decision_us(rules: int = 1000, rounds: int = 1000) -> float:
    """In-process cost of one policy decision of the governed call with ``rules`` rules added to the shipped policy, µs.

    Each added rule is scoped to one tool (``resource == Tool::"..."``), as a large policy
    with a rule per tool is written; one in a hundred names the bench's tool. Mean over ``rounds``.
    """
    from effectgate.contracts.directory import PrincipalDirectory
    from effectgate.policy.cedar.attributes import load_attributes
    from effectgate.policy.cedar.loading import build_engine

    policy, descriptor, arguments = DEPLOY_DIR / "policy", bench_descriptor(), {"path": "data.txt"}
    text = (policy / "policy.cedar").read_text(encoding="utf-8") + "\n" + "".join(_rule(n) for n in range(rules))
    directory = PrincipalDirectory.from_toml((policy / "principals.toml").read_text(encoding="utf-8"))
    engine = build_engine(text, directory, load_attributes(policy / "attributes.toml"), [descriptor])
    engine.decide(AGENT, descriptor, "read", arguments)  # the first call builds the tool's policy set
    started = time.perf_counter()
    for _ in range(rounds):
        engine.decide(AGENT, descriptor, "read", arguments)
    return (time.perf_counter() - started) / rounds * 1e6
