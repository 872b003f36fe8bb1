"""The record filling up after a request was admitted never leaves that request without its receipt.

The stack's record stream has a byte limit and a high-water mark at half of it. An agent's call
waits for approval while another agent floods the stream with large requests: above the mark
the policy denies each new request ``store_full`` (each still gets its receipt), the crossing
is reported as a security event, and the call admitted before is approved and runs, its grant,
claim and receipt written in the room the mark kept.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.security import SecurityKind

from .support import Paths

pytestmark = [pytest.mark.e2e, pytest.mark.nats_2_10]

LIMIT_BYTES = 1_500_000
"""The record's byte limit: the stack's start-up events and the flood below fit, the flood crosses half."""

FLOOD_BYTES = 40_000
"""Size of one flooding request's argument (under the policy's 64 KiB request limit)."""


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Paths) -> dict[str, str]:
    ports = {f"EFFECTGATE_{service.upper()}_HTTP_PORT": "0" for service in ("policy", "audit")}
    return {"EFFECTGATE_BUS_RECORD_MAX_BYTES": str(LIMIT_BYTES), "EFFECTGATE_BUS_STORE_HIGH_WATER": "0.5", **ports}


async def _readyz(gate: Any, service: str, timeout_s: float = 15.0) -> tuple[int, str]:
    """``/readyz`` of ``service`` once it names the record store, or its last answer after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        port = gate.stack.http_port(service)
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/readyz") as answer:
            found = answer.status, await answer.text()
        if "record_store" in found[1] or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


async def _flood_until_refused(gate: Any, agent: str) -> list[tuple[str, Any]]:
    """Large requests from ``agent``, each to its receipt, until one is denied ``store_full``."""
    ended = []
    for number in range(LIMIT_BYTES // FLOOD_BYTES):
        request_id = await gate.submit(agent, "read", {"path": f"{number}-" + "x" * FLOOD_BYTES})
        receipt = await gate.receipt(agent, request_id)
        ended.append((request_id, receipt))
        if receipt.reason_code == "store_full":
            return ended
    raise AssertionError(f"no store_full denial after {len(ended)} requests of {FLOOD_BYTES} bytes")


async def test_a_call_admitted_before_the_store_filled_still_runs_to_its_receipt(gate: Any, new_id: Any) -> None:
    waiting, flooder, name = gate.agent(), gate.agent(), new_id("admitted-") + ".txt"
    admitted = await gate.submit(waiting, "write", {"path": name, "content": "kept"})
    pending = await gate.pending(admitted)

    flood = await _flood_until_refused(gate, flooder)
    late = await gate.submit(flooder, "read", {"path": "a.txt"})
    denied = await gate.receipt(flooder, late)
    assert (denied.outcome, denied.reason_code) == ("denied", "store_full"), denied.reason
    assert "nearly full" in denied.reason and "try again" in denied.reason

    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    issued = await gate.receipt(waiting, admitted)
    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    assert (gate.paths.sandbox / name).read_text() == "kept"

    await gate.settle()
    for request_id, _ in [*flood, (late, denied)]:
        assert await gate.count(Subjects.receipt(flooder, request_id)) == 1
    assert await gate.count(Subjects.receipt(waiting, admitted)) == 1
    assert await gate.count(Subjects.security("policy", SecurityKind.STORE_NEARLY_FULL)) >= 1
    for service in ("policy", "audit"):
        status, body = await _readyz(gate, service)
        assert status == 503 and "record_store" in body and "nearly full" in body, (service, status, body)
    info = await gate.js.stream_info(catalog.STREAM)
    assert info.state.bytes < LIMIT_BYTES, "the store filled to its limit: the mark kept no room"
