"""The services' logs as an operator reads them: JSON lines, one request line per service, no argument values.

The module's stack writes JSON lines (``EFFECTGATE_LOG_FORMAT=json``), so every line of every
service's log must parse: a blank line, a colour code or a framework banner would not.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Rpc

pytestmark = pytest.mark.e2e

SERVICES = ("registry", "policy", "approvals", "executor", "audit")


@pytest.fixture(scope="module")
def stack_env() -> dict[str, str]:
    """JSON lines from every service."""
    return {"EFFECTGATE_LOG_FORMAT": "json"}


def _records(gate: Any, service: str) -> list[dict[str, Any]]:
    """Every line of ``service``'s log, parsed (a line that is not a JSON object fails the test)."""
    path: Path = gate.stack.state_dir / "logs" / f"{service}.log"
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        record = json.loads(line)  # raises on a blank line, a banner or a colour code
        assert isinstance(record, dict) and record["service"] == service, f"{service}.log:{number}: {line!r}"
        records.append(record)
    return records


def _request_lines(gate: Any, service: str, request_id: str) -> list[dict[str, Any]]:
    return [
        r for r in _records(gate, service) if r["logger"] == "effectgate.requests" and r.get("request_id") == request_id
    ]


async def _lines_for(gate: Any, service: str, request_id: str, count: int) -> list[dict[str, Any]]:
    """The request lines of ``request_id`` in ``service``'s log once there are ``count`` (written after the ack)."""
    return await _eventually(lambda: _request_lines(gate, service, request_id), count)


async def _eventually(read: Callable[[], list[dict[str, Any]]], count: int) -> list[dict[str, Any]]:
    """``read()`` once it returns ``count`` lines or more, or what it returns after 10 s."""
    deadline = time.monotonic() + 10.0
    while True:
        lines = read()
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        await asyncio.sleep(0.1)


def _has(line: dict[str, Any], **expected: Any) -> None:
    assert {key: line.get(key) for key in expected} == expected, line
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0, line


async def test_a_call_is_one_request_line_in_each_service_it_passes(gate: Any, new_id: Any) -> None:
    agent = gate.agent()
    receipt = await gate.call(agent, "read", {"path": "hello.txt"})
    await gate.settle()
    call = {"request_id": receipt.request_id, "principal": agent}
    what = {"tool": "file_system", "operation": "read"}

    [decision] = await _lines_for(gate, "policy", receipt.request_id, 1)
    _has(decision, message="decision", **call, **what, verdict="execute", reason_code="permitted")
    [issued] = await _lines_for(gate, "executor", receipt.request_id, 1)
    _has(issued, message="receipt", **call, **what, outcome="succeeded", reason_code="ok")
    appended = await _lines_for(gate, "audit", receipt.request_id, 3)
    assert sorted(line["event"] for line in appended) == ["decision.made", "receipt.issued", "tool.requested"]
    for line in appended:
        _has(line, message="appended", **call)
        assert isinstance(line["seq"], int)
    assert await _lines_for(gate, "approvals", receipt.request_id, 0) == []


async def test_an_approved_call_is_a_line_per_approval_event_and_its_values_are_never_logged(
    gate: Any, new_id: Any
) -> None:
    agent, name, content = gate.agent(), new_id("logged-") + ".txt", new_id("content-never-logged-")
    request_id = await gate.submit(agent, "write", {"path": name, "content": content})
    pending = await gate.pending(request_id)
    assert (await gate.decide("alice", pending["approval_id"]))["ok"]
    receipt = await gate.receipt(agent, request_id)
    await gate.settle()

    call = {"request_id": request_id, "principal": agent, "tool": "file_system", "operation": "write"}
    [decision] = await _lines_for(gate, "policy", request_id, 1)
    _has(decision, **call, verdict="needs_approval")
    requested, granted = await _lines_for(gate, "approvals", request_id, 2)
    _has(requested, message="approval", **call, approval="requested", approval_id=pending["approval_id"])
    _has(granted, message="approval", **call, approval="granted", approver="alice", method=Rpc.APPROVALS_DECIDE)
    [issued] = await _lines_for(gate, "executor", request_id, 1)
    _has(issued, **call, outcome=receipt.outcome, consumer="executor-approvals")
    for service in SERVICES:
        text = (gate.stack.state_dir / "logs" / f"{service}.log").read_text(encoding="utf-8")
        assert content not in text and name not in text, f"an argument value is in {service}.log"


async def test_a_registry_request_is_one_line_naming_the_method_and_its_result(gate: Any) -> None:
    before = len(_records(gate, "registry"))
    reply = await gate.rpc(Rpc.REGISTRY_GET, {"tool": "file_system"})
    unknown = await gate.rpc(Rpc.REGISTRY_GET, {"tool": "no_such_tool"})
    assert reply["ok"] and not unknown["ok"]
    lines = await _eventually(lambda: _records(gate, "registry")[before:], 2)

    found, refused = (line for line in lines if line["logger"] == "effectgate.requests")
    _has(found, message="answered", method=Rpc.REGISTRY_GET, result="ok", reason_code="found", tool="file_system")
    _has(refused, message="answered", method=Rpc.REGISTRY_GET, result="refused", reason_code="unknown_tool")


def test_each_service_says_once_that_it_started(gate: Any) -> None:
    for service in SERVICES:
        started = [r for r in _records(gate, service) if r["message"] == "started"]
        assert len(started) == 1, (service, started)
        assert not any("FastStream app" in r["message"] for r in _records(gate, service)), service
