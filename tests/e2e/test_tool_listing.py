"""What a caller sees is what it may call, on a real stack (secured NATS by default).

The registry publishes ``file_system`` and three more tools: ``repo`` (a read, a
reversible write that needs an approval at autonomy 1, an irreversible ``reset`` that
autonomy 1 may not call at all), ``payments`` (a financial refund and a medium-risk
read: nothing for autonomy 1 or 2) and ``release`` (production: approval by an SRE).
None of them is ever run: listings and refusals happen before the executor.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.contracts.events import ReceiptIssued
from effectgate.sdk import RegistryUnavailable

pytestmark = pytest.mark.e2e

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


def _operation(side_effect: str, risk: str) -> dict[str, Any]:
    return {"side_effect_class": side_effect, "risk_tier": risk, "input_schema": SCHEMA, "output_schema": {}}


def _tool(name: str, **operations: dict[str, Any]) -> dict[str, Any]:
    limit = {"calls": 50, "period_s": 60}
    return {
        "name": name,
        "version": "1.0.0",
        "adapter": "file_system",  # listed and decided only, never run
        "timeout_s": 5,
        "rate_limit": limit,
        "operations": operations,
    }


TOOLS = [
    _tool(
        "repo",
        log=_operation("READ_ONLY", "low"),
        commit=_operation("REVERSIBLE_WRITE", "low"),
        reset=_operation("IRREVERSIBLE_WRITE", "high"),
    ),
    _tool("payments", refund=_operation("FINANCIAL", "medium"), balance=_operation("READ_ONLY", "medium")),
    _tool("release", ship=_operation("PRODUCTION", "high")),
]
EVERYTHING = {
    "file_system": {"read", "list", "write"},
    "repo": {"log", "commit", "reset"},
    "payments": {"refund", "balance"},
    "release": {"ship"},
}


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path) -> dict[str, str]:
    tools = e2e_paths.state.parent / "tools"
    tools.mkdir()
    shutil.copy(repo_root / "deploy/tools/file_system.json", tools)
    for descriptor in TOOLS:
        (tools / f"{descriptor['name']}.json").write_text(json.dumps(descriptor))
    return {"EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(tools)}


async def _seen(gate: Any, principal: str) -> dict[str, set[str]]:
    async with await gate.connect(principal) as client:
        return {tool.name: set(tool.operations) for tool in await client.list_tools()}


async def test_an_autonomy_1_listing_hides_what_it_may_not_call_and_shows_approvals(gate: Any) -> None:
    assert await _seen(gate, gate.agent(1)) == {
        "file_system": {"read", "list", "write"},  # write: with an approval
        "repo": {"log", "commit"},  # commit: with an approval; reset (irreversible): hidden
        "release": {"ship"},  # with an SRE's approval
    }


async def test_an_autonomy_2_listing_adds_the_irreversible_write(gate: Any) -> None:
    seen = await _seen(gate, gate.agent(2))
    assert seen["repo"] == {"log", "commit", "reset"} and "payments" not in seen


@pytest.mark.parametrize("approver", ["bob", "alice"])
async def test_operators_and_approvers_still_see_every_tool(gate: Any, approver: str) -> None:
    """``effectgate tools list`` asks ``tg.registry.list`` with an approver's credentials."""
    listed = await gate.rpc(Rpc.REGISTRY_LIST, {}, approver=approver)
    assert {d["name"]: set(d["operations"]) for d in listed["descriptors"]} == EVERYTHING


def _comparable(issued: ReceiptIssued, names: dict[str, str]) -> bytes:
    """The receipt without its ids and times, names replaced: what must be identical byte for byte."""
    fields = msgspec.to_builtins(issued)
    for volatile in ("event_id", "occurred_at", "request_id", "principal", "idempotency_key", "signature"):
        fields.pop(volatile, None)
    text = msgspec.json.encode(fields).decode()
    for name, placeholder in names.items():
        for quoted in (f"'{name}'", f'"{name}"', f"{name} "):
            text = text.replace(quoted, quoted.replace(name, placeholder))
    return text.encode()


@pytest.mark.parametrize(
    ("hidden", "missing", "policy_code"),
    [
        (("repo", "reset"), ("repo", "rebase"), "no_permit"),  # a hidden operation of a visible tool
        (("payments", "refund"), ("paymentz", "refund"), "no_permit"),  # hidden whole: no amount to judge
        (("payments", "balance"), ("nothing", "balance"), "no_permit"),
    ],
)
async def test_calling_a_hidden_tool_gets_the_receipt_of_a_missing_one(
    gate: Any, hidden: tuple[str, str], missing: tuple[str, str], policy_code: str
) -> None:
    principal = gate.agent(1)
    names = {hidden[0]: "TOOL", missing[0]: "TOOL", hidden[1]: "OP", missing[1]: "OP"}
    receipts = []
    for tool, operation in (hidden, missing):
        for arguments in ({"n": 1}, {"n": "schema-invalid"}):
            receipts.append(await gate.call(principal, operation, arguments, tool=tool))
    assert {r.outcome for r in receipts} == {"denied"}
    assert {r.reason_code for r in receipts} <= {"unknown_tool", "unknown_operation"}
    assert len({_comparable(r, names) for r in receipts}) == 1, [r.reason for r in receipts]

    decisions = [await _decision(gate, r.request_id) for r in receipts]
    assert [d.get("hidden_reason_code") for d in decisions] == [policy_code, policy_code, None, None]
    assert all(d.get("hidden_reason") for d in decisions[:2]), "operators read the policy's own reason"


async def _decision(gate: Any, request_id: str) -> dict[str, Any]:
    for _ in range(100):
        found = [r for r in await gate.trail(request_id) if r["event_type"] == "decision.made"]
        if found:
            return dict(json.loads(found[0]["payload"]))
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no decision of {request_id} in the audit trail")


async def test_describing_a_hidden_tool_fails_like_a_missing_one(gate: Any) -> None:
    async with await gate.connect(gate.agent(1)) as client:
        errors = []
        for tool in ("payments", "paymentz"):
            with pytest.raises(RegistryUnavailable) as raised:
                await client.describe(tool)
            errors.append(str(raised.value).replace(tool, "TOOL"))
        assert errors[0] == errors[1] == "no tool 'TOOL' at version latest"
        repo = await client.describe("repo")
        assert set(repo.operations) == {"log", "commit"}


@pytest.mark.parametrize(
    "subject",
    [
        Rpc.REGISTRY_LIST,
        Rpc.REGISTRY_GET,
        Rpc.tools_list("a1-59"),
        Rpc.tools_get("a2-59"),
        Rpc.tools_list("selfie"),
    ],
)
async def test_an_agent_cannot_ask_for_another_listing_or_the_full_registry(gate: Any, subject: str) -> None:
    """Secured: the server refuses the publish. Open (explicitly insecure): nothing stops it."""
    principal = gate.agent(1)
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error).lower())

    options = gate.stack.connect_options(agent_user(principal)) if gate.stack.credentials else {}
    nc = await nats.connect(gate.stack.nats_url, error_cb=collect, allow_reconnect=False, **options)
    try:
        answered = await _answered(nc, subject)
        await nc.request(Rpc.tools_list(principal), b"{}", timeout=5)  # its own listing still works
    finally:
        await nc.close()
    refused = any(f'permissions violation for publish to "{subject}' in error for error in errors)
    assert (refused, answered) == ((True, False) if gate.stack.credentials else (False, True)), errors


async def _answered(nc: Any, subject: str) -> bool:
    try:
        await nc.request(subject, b'{"tool": "payments"}', timeout=2)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
        return False
    return True


async def test_the_policy_service_reports_ready(gate: Any) -> None:
    readiness = await gate.rpc(Rpc.POLICY_READY, {})
    assert readiness["ready"] is True and "policies loaded" in readiness["reason"]
