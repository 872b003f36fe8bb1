"""Each service serves /livez, /readyz and /metrics; governed calls move its counters; NATS down → 503.

The module's stack gets an HTTP port per service (``EFFECTGATE_<SERVICE>_HTTP_PORT``, bound by the stack); the
test scrapes the real endpoints of the real processes. The NATS outage runs last.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from effectgate.cli.stack.readiness import wait_ready
from effectgate.contracts.bus import catalog
from effectgate.contracts.events import Outcome

pytestmark = pytest.mark.e2e

POLICY_DURABLE = catalog.POLICY_CONSUMER.durable
SERVICES = ("registry", "policy", "approvals", "executor", "audit")


PORTS: dict[str, int] = {}
"""Each service's health and metrics port, once the stack runs."""


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    """An HTTP port for each service: any (``0``), bound by the stack itself and handed down, so never lost."""
    return {f"EFFECTGATE_{service.upper()}_HTTP_PORT": "0" for service in SERVICES}


@pytest.fixture(scope="module", autouse=True)
def ports(stack: Any) -> None:
    """Where each service of the running stack serves its health and metrics."""
    PORTS.update({service: stack.http_port(service) for service in SERVICES})


async def _get(service: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{PORTS[service]}{path}") as answer:
        return answer.status, await answer.text()


async def _samples(service: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    status, text = await _get(service, "/metrics")
    assert status == 200, text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _total(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    wanted = set(labels.items())
    return sum(value for (found, have), value in samples.items() if found == name and wanted <= have)


async def _readyz_until(service: str, wanted: int, timeout_s: float) -> tuple[int, str]:
    """``/readyz`` once it answers ``wanted``, or its last answer after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = await _get(service, "/readyz")
        if status == wanted or time.monotonic() > deadline:
            return status, body
        await asyncio.sleep(0.3)


async def test_every_service_is_live_and_ready(gate: Any) -> None:
    for service in SERVICES:
        assert (await _get(service, "/livez"))[0] == 200
        status, body = await _readyz_until(service, 200, 20.0)
        assert status == 200, f"{service}: {body}"


async def test_governed_calls_move_the_counters(gate: Any) -> None:
    policy_before, executor_before = await _samples("policy"), await _samples("executor")
    agent = gate.agent()
    issued = [await gate.call(agent, "read", {"path": "hello.txt"}) for _ in range(3)]
    denied = await gate.call(agent, "read", {"path": "hello.txt"}, tool="no_such_tool")
    assert all(r.outcome is Outcome.SUCCEEDED for r in issued) and denied.outcome is Outcome.DENIED
    policy, executor = await _samples("policy"), await _samples("executor")

    def moved(after: Any, before: Any, name: str, **labels: str) -> float:
        return _total(after, name, **labels) - _total(before, name, **labels)

    assert moved(policy, policy_before, "effectgate_decisions_total", verdict="execute") >= 3
    assert moved(policy, policy_before, "effectgate_decisions_total", verdict="deny") >= 1
    assert moved(policy, policy_before, "effectgate_stage_duration_seconds_count", stage="policy") >= 4
    assert moved(executor, executor_before, "effectgate_receipts_total", outcome="succeeded") >= 3
    assert moved(executor, executor_before, "effectgate_receipts_total", outcome="denied") >= 1
    assert moved(executor, executor_before, "effectgate_call_duration_seconds_count") >= 4
    assert moved(executor, executor_before, "effectgate_stage_duration_seconds_count", stage="execution") >= 3


async def test_sampled_gauges_are_reported(gate: Any) -> None:
    await gate.call(gate.agent(), "read", {"path": "hello.txt"})
    deadline = time.monotonic() + 15.0
    while True:
        audit, policy = await _samples("audit"), await _samples("policy")
        lag = [v for (name, _), v in audit.items() if name == "effectgate_audit_lag_seconds"]
        pending = {dict(labels).get("durable") for (name, labels) in policy if name == "effectgate_consumer_pending"}
        approvals = ("effectgate_approvals_pending", frozenset()) in await _samples("approvals")
        if (lag and POLICY_DURABLE in pending and approvals) or time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    assert lag and lag[0] >= 0
    assert POLICY_DURABLE in pending
    assert approvals, "the approvals service reports no effectgate_approvals_pending gauge"


async def _gauge_until(service: str, name: str, at_least: float, timeout_s: float) -> float:
    """The gauge's value once it is at least ``at_least``, or its last value after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = _total(await _samples(service), name)
        if value >= at_least or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.5)


async def test_an_approval_is_pending_in_the_gauges_and_its_wait_is_recorded(gate: Any, new_id: Any) -> None:
    before = await _samples("executor")
    agent = gate.agent()
    request_id = await gate.submit(agent, "write", {"path": new_id("approved-") + ".txt", "content": "x"})
    pending = await gate.pending(request_id)
    assert await _gauge_until("approvals", "effectgate_approvals_pending", 1, 15.0) >= 1
    assert _total(await _samples("approvals"), "effectgate_approval_oldest_age_seconds") >= 0
    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    assert (await gate.receipt(agent, request_id)).outcome is Outcome.SUCCEEDED
    after = await _samples("executor")
    waited = "effectgate_stage_duration_seconds_count"
    assert _total(after, waited, stage="approval") - _total(before, waited, stage="approval") >= 1


@pytest.mark.fault
async def test_readyz_says_nats_when_nats_is_down_and_recovers(gate: Any) -> None:
    server = gate.stack.servers["nats"]
    server.kill()
    try:
        for service in SERVICES:
            found = await _readyz_until(service, 503, 15.0)
            assert found[0] == 503, f"{service} still ready with NATS down"
            assert '"nats"' in found[1] and "not connected to NATS" in found[1], found[1]
            assert (await _get(service, "/livez"))[0] == 200
    finally:
        await asyncio.to_thread(server.restart)
    await wait_ready(gate.stack, SERVICES)
    for service in SERVICES:
        status, body = await _readyz_until(service, 200, 30.0)
        assert status == 200, f"{service}: {body}"
