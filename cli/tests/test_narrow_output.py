"""Every CLI table and report reads at 80 columns (and 120): no word of the data is split across lines.

Each renderer is printed with Rich's recording console at each width; every token of what it
shows (the words of its cells, its ids, subjects, digests as shortened) must then stand whole on
one line, and no line may be wider than the terminal. Realistic values: the demo's audit trail,
MCP tools, security events, a pending approval, the ``up`` banner.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console, RenderableType

from effectgate.cli.bench.figures import Figures
from effectgate.cli.bench.processes import CpuPerCall
from effectgate.cli.bench.report import Report as BenchReport
from effectgate.cli.bench.report import Row, SizeRow, print_report
from effectgate.cli.commands.budgets import _counters_table, _differences_table
from effectgate.cli.commands.call import _shown
from effectgate.cli.commands.requests import _line as _request_line
from effectgate.cli.demo.chat import transcript_table
from effectgate.cli.render.approvals import approvals_blocks
from effectgate.cli.render.describe import describe_tool
from effectgate.cli.render.fitted import _SEPARATORS, FittedTable, short_digest
from effectgate.cli.render.policy import changes_table
from effectgate.cli.render.views import alarm_row, alarms_table, receipt_row, receipts_table, tools_table, trail_table
from effectgate.cli.stack.announce import announce
from effectgate.cli.stack.credentials import BusCredentials
from effectgate.cli.stack.ports import Ports
from effectgate.cli.stack.system import Stack
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.rpc.policy import BudgetCounter
from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.contracts.vocabulary import Outcome, RiskTier, SideEffectClass, Verdict
from effectgate.policy.budgets.reconciliation import Difference
from effectgate.policy.what_if.simulation import Case, Change, Report

WIDTHS = (80, 120)
REQUEST = "r-3f2a1b2c4d5e6f70"
DIGEST = "sha256:" + "3f2a1b2c4d5e6f708192a3b4c5d6e7f8" * 2
WHEN = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


Printed = RenderableType | Callable[[Console], None]
"""What is printed: a renderable, or a function that prints on the console it is given (the banner)."""


def _lines(printed: Printed, width: int) -> list[str]:
    console = Console(width=width, record=True, file=StringIO(), color_system=None)
    if callable(printed) and not hasattr(printed, "__rich_console__"):
        printed(console)
    else:
        console.print(printed)
    return [line.rstrip() for line in console.export_text().splitlines()]


def _cell_tokens(table: FittedTable) -> set[str]:
    return {word for row in table.rows for cell in row for word in cell.plain.split()}


def _assert_readable(printed: Printed, tokens: set[str], width: int, whole: tuple[str, ...] = ()) -> None:
    """Each token whole on one line; every line within ``width`` but those holding a ``whole`` part (paths)."""
    lines = _lines(printed, width)
    split = sorted(token for token in tokens if not any(token in line for line in lines))
    assert not split, f"split across lines at {width} columns: {split}\n" + "\n".join(lines)
    wide = [line for line in lines if len(line) > width and not any(part in line for part in whole)]
    assert not wide, wide


def _trail() -> FittedTable:
    def record(sequence: int, event_type: str, subject: str, payload: dict[str, Any]) -> dict[str, Any]:
        occurred = f"2026-12-01T10:00:0{sequence % 10}.123456Z"
        shown = {"sequence": sequence, "occurred_at": occurred, "event_type": event_type, "subject": subject}
        return shown | {"payload": json.dumps(payload), "hash": DIGEST}

    write = {"operation": "write", "arguments": {"path": "notes/today.txt", "content": "written by the agent"}}
    verdict = {"verdict": "needs_approval", "reason_code": "needs_approval", "reason": "needs an operator"}
    records = [
        record(41, "tool.requested", "tg.req.demo-agent", {"kind": "tool.requested", **write}),
        record(42, "decision.made", f"tg.decision.demo-agent.{REQUEST}", verdict),
        record(43, "approval.granted", f"tg.approval.granted.demo-agent.{REQUEST}", {"approver": "alice"}),
        record(44, "receipt.issued", f"tg.receipt.demo-agent.{REQUEST}", {"outcome": "succeeded", "reason": "ok"}),
    ]
    return trail_table(REQUEST, records)


def _alarms() -> FittedTable:
    table = alarms_table()
    refused = {"kind": "approval_refused", "actor": "mallory", "principal": "selfie", "request_id": REQUEST}
    refused |= {"approval_id": "ap-1234abcd5678", "reason_code": "self_approval", "detail": "one's own request"}
    violation = {"kind": "permission_violation", "actor": "agent-demo-agent", "reason_code": "publish_denied"}
    violation |= {"subject": f"tg.decision.demo-agent.{REQUEST}", "detail": "Permissions Violation for Publish"}
    for sequence, service, event in ((7, "approvals", refused), (8, "executor", violation)):
        stamped = {**event, "occurred_at": WHEN.isoformat()}
        alarm_row(table, {"sequence": sequence, "service": service, "event": stamped})
    return table


def _tools() -> FittedTable:
    def operation(effect: SideEffectClass, risk: RiskTier, **extra: Any) -> OperationSpec:
        return OperationSpec(side_effect_class=effect, risk_tier=risk, input_schema={}, output_schema={}, **extra)

    own = {"rate_limit": RateLimit(calls=10, period_s=60)}
    tools = [
        ToolDescriptor(
            name="file_system",
            version="1.0.0",
            adapter="file_system",
            operations={
                "read": operation(SideEffectClass.READ_ONLY, RiskTier.LOW),
                "write": operation(SideEffectClass.REVERSIBLE_WRITE, RiskTier.MEDIUM, **own),
            },
        ),
        ToolDescriptor(
            name="mcp_filesystem",
            version="2.1.0",
            adapter="mcp",
            operations={
                "read_text_file": operation(SideEffectClass.READ_ONLY, RiskTier.LOW),
                "move_file": operation(SideEffectClass.IRREVERSIBLE_WRITE, RiskTier.HIGH, open_world=True),
            },
        ),
    ]
    return tools_table(tools, {"mcp_filesystem": ToolState(state="unavailable", reason="lost", since=WHEN)})


def _receipts() -> FittedTable:
    table = receipts_table("What the agent asked, and the receipts")
    for step, outcome, code in (("2 read a file", Outcome.SUCCEEDED, "ok"), ("3 read outside", Outcome.DENIED, "x")):
        receipt = ReceiptIssued(
            event_id="e-1",
            occurred_at=WHEN,
            request_id=REQUEST,
            principal="demo-agent",
            outcome=outcome,
            reason_code="path_outside_sandbox" if code == "x" else code,
            reason="the path leaves the sandbox: ../outside/secret.txt" if code == "x" else "read",
            result={"content": "hello from the sandbox", "size_bytes": 23} if code == "ok" else None,
        )
        receipt_row(table, step, "file_system.read", receipt)
    return table


def _changes() -> FittedTable:
    def case(request_id: str) -> Case:
        return Case(
            request_id=request_id,
            principal="demo-agent",
            occurred_at=WHEN,
            tool="file_system",
            version="1.0.0",
            operation="write",
            arguments={},
            before=Verdict.EXECUTE,
            before_code="ok",
            digest=None,
            policy_version=DIGEST,
        )

    changes = [Change(case(f"r-{n:016x}"), Verdict.NEEDS_APPROVAL, "needs_approval") for n in range(3)]
    return changes_table(Report(compared=3, changes=changes))


def _budgets() -> list[FittedTable]:
    counter = BudgetCounter(
        principal="demo-agent",
        budget="payments_per_day",
        start_s=int(WHEN.timestamp()),
        window_s=86400,
        limit_units=1_000_000,
        used_units=250_000,
        reserved_units=10_000,
        records={},
    )
    difference = Difference(
        kind="uncertain_reservation",
        principal="demo-agent",
        budget="payments_per_day",
        start_s=0,
        request_id=REQUEST,
        detail="reserved 1.0000 but no receipt says how the call ended",
    )
    return [_counters_table([counter]), _differences_table([difference])]


def _transcript() -> FittedTable:
    card = {"type": "m.room.message", "sender": "@effectgate-bot:localhost"}
    card |= {"content": {"body": f"approval ap-1234abcd5678 for {REQUEST}", "dev.effectgate.approval": {}}}
    reaction = {"type": "m.reaction", "sender": "@alice:localhost"}
    reaction |= {"content": {"m.relates_to": {"key": "✅", "event_id": "$Zm9vYmFyYmF6cXV4cXV1eA_abcdefghijkl"}}}
    return transcript_table([card, reaction])


TABLES = {
    "audit trail": _trail,
    "audit alarms": _alarms,
    "tools list": _tools,
    "demo receipts": _receipts,
    "policy simulate": _changes,
    "budget counters": lambda: _budgets()[0],
    "budget differences": lambda: _budgets()[1],
    "chat transcript": _transcript,
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_no_word_of_a_table_is_split_across_lines(name: str, width: int) -> None:
    table = TABLES[name]()

    _assert_readable(table, _cell_tokens(table), width)


def test_digests_are_shortened_in_text(width: int = 80) -> None:
    shown = "\n".join(_lines(_trail(), width))

    assert short_digest(DIGEST) in shown and DIGEST not in shown and short_digest(DIGEST) == DIGEST[:19] + "…"


def _pending() -> dict[str, Any]:
    request = {"principal": "demo-agent", "tool": "file_system", "version": "1.0.0", "operation": "write"}
    request["arguments"] = {"path": "notes/today.txt", "content": "written by the agent"}
    request["descriptor_digest"] = "sha256:" + "d" * 64
    return {
        "approval_id": "ap-1234abcd5678",
        "request_id": REQUEST,
        "principal": "demo-agent",
        "request": request,
        "approver_role": "operator",
        "approvers": ["alice", "bob"],
        "approvals_required": 2,
        "votes": ["alice"],
        "side_effect_class": "REVERSIBLE_WRITE",
        "risk_tier": "medium",
        "opened_at": "2026-12-01T09:55:00Z",
        "expires_at": "2026-12-01T10:55:00Z",
        "idempotency_key": "k-" + "9" * 30,
        "policy_id": "write-needs-two-operators",
        "request_hash": DIGEST,
    }


@pytest.mark.parametrize("width", WIDTHS)
def test_an_approval_block_splits_no_word(width: int) -> None:
    item = _pending()
    tokens = {item["approval_id"], REQUEST, "file_system@1.0.0", "demo-agent", "REVERSIBLE_WRITE,", "medium"}
    tokens |= {item["idempotency_key"], item["policy_id"], short_digest(DIGEST), '"notes/today.txt"'}

    _assert_readable(approvals_blocks([item], WHEN), tokens, width)


def _stack(state: Path) -> Stack:
    passwords = {"operator": "p", "agent-demo-agent": "p"}
    credentials = BusCredentials(passwords, {"agent-demo-agent": "_INBOX_agent-demo-agent"})
    env = {
        "EFFECTGATE_CHATOPS_PLATFORM": "matrix",
        "EFFECTGATE_CHATOPS_MATRIX_USER": "@effectgate-bot:matrix.example.org",
    }
    stack = Stack(state, "nats://127.0.0.1:40413", "redis://127.0.0.1:6379/0", env, credentials=credentials)
    services = ("registry", "policy", "approvals", "executor", "audit")
    chosen = {"nats": 40413, "nats-monitoring": 8222, "redis": 6379}
    chosen |= {name: 9471 + n for n, name in enumerate(services)}
    moved = ["executor: port 9474 was taken before it was bound; listening on 41234"]
    stack.ports, stack.policy_version = Ports(chosen, moved=moved), DIGEST
    stack.processes = dict.fromkeys(services)  # type: ignore[arg-type]  # only their names are read
    return stack


@pytest.mark.parametrize("width", WIDTHS)
def test_the_up_banner_splits_no_word_and_prints_paths_and_commands_whole(width: int) -> None:
    state = Path("/home/someone/projects/effectgate-checkout/.effectgate")
    stack = _stack(state)

    def banner(console: Console) -> None:
        announce(console, stack, str(state / "sandbox"), state)

    lines = _lines(banner, width)

    whole = (
        f"AGENT_CREDENTIALS={state}/credentials/agent-demo-agent.json \\",
        f"{state}/credentials/operator.json",
        f"EFFECTGATE_PUBLIC_KEYS_DIR={state}/keys/public",
        f"file_system sandbox: {state}/sandbox",
    )
    for line in whole:
        assert any(line in shown for shown in lines), line
    tokens = {"nats://127.0.0.1:40413", "http://127.0.0.1:9474", short_digest(DIGEST)}
    tokens |= {"@effectgate-bot:matrix.example.org"}
    tokens |= {"41234", "`effectgate", "publish", 'ToolClient.connect(os.environ["NATS_URL"],'}
    _assert_readable(banner, tokens, width, whole=(str(state),))


def _bench(console: Console) -> None:
    def figures(concurrency: int) -> Figures:
        return Figures(concurrency=concurrency, calls=2000, p50_ms=1.234, p99_ms=12.345, calls_per_s=12345.0)

    names = ("registry", "policy", "approvals", "executor", "audit", "nats-server", "redis-server")
    cpu = CpuPerCall(per_process_us=dict.fromkeys(names, 123.0), total_us=861.0, resolution_us=5.0, nats_messages=14.0)
    rows = [Row(c, figures(c), figures(c), figures(c), cpu, cpu, cpu) for c in (8, 64)]
    sizes = [
        SizeRow(tools=tools, publish_s=1.0, runs=[figures(8), figures(64)], cpu=[cpu, cpu]) for tools in (10, 10000)
    ]
    memory = dict.fromkeys(names, 80.5)
    report = BenchReport(2000, rows, memory, {8: {}, 64: {}}, 50.0, 3.0, sizes, memory, 5000, 70.0)
    print_report(console, report)


def _described(console: Console) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string", "maxLength": 4096}}, "required": ["path"]}
    spec = OperationSpec(
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
        input_schema=schema,
        output_schema={"type": "object"},
        description="Read one file below the sandbox root (symbolic links that leave it are refused).",
    )
    tool = ToolDescriptor(name="mcp_filesystem", version="2.1.0", adapter="mcp", operations={"read_text_file": spec})
    console.print(describe_tool(tool, {"state": "ready", "state_reason": "14 tools, 0.8 s"}))


def _called(console: Console) -> None:
    receipt = ReceiptIssued(
        event_id="e-1",
        occurred_at=WHEN,
        request_id=REQUEST,
        principal="demo-agent",
        outcome=Outcome.SUCCEEDED,
        reason_code="ok",
        reason="read 23 bytes",
        tool="file_system",
        operation="read",
        result={"content": "hello from the sandbox", "size_bytes": 23},
    )
    console.print(_shown(receipt, "file_system", "read"))


def _requested(console: Console) -> None:
    item = {"outcome": "denied", "tool": "file_system", "version": "1.0.0", "operation": "read"}
    item |= {"principal": "demo-agent", "requested_at": "2026-12-01T09:59:00Z", "request_id": REQUEST}
    item |= {"reason_code": "path_outside_sandbox", "reason": "the path leaves the sandbox: ../outside/secret.txt"}
    console.print(_request_line(item, WHEN))


REPORTS = {"bench": _bench, "tools describe": _described, "call": _called, "requests": _requested}


def _words(printed: Printed) -> set[str]:
    """Every word of ``printed`` laid out wide enough for nothing to wrap."""
    words = {word for line in _lines(printed, 1000) for word in _SEPARATORS.split(line) if word}
    return {word for word in words if not all("\u2500" <= char <= "\u257f" for char in word)}  # not a rule


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(REPORTS))
def test_no_word_of_a_report_is_split_across_lines(name: str, width: int) -> None:
    printer = REPORTS[name]

    _assert_readable(printer, _words(printer), width)
