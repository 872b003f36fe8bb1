"""The operator's commands without a stack: version, input refused before anything is sent, 80-column text."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import msgspec
import pytest
from rich.console import Console
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.commands.requests import parse_since
from effectgate.cli.render.describe import describe_tool
from effectgate.cli.render.output import did_you_mean
from effectgate.contracts.tools.descriptors import ToolDescriptor

ROOT = Path(__file__).resolve().parents[2]


def _at_80(renderable: object) -> list[str]:
    out = StringIO()
    Console(file=out, width=80, color_system=None).print(renderable)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_version_is_the_installed_packages() -> None:
    from importlib.metadata import version

    printed = CliRunner().invoke(app, ["--version"])
    assert printed.exit_code == 0 and printed.stdout.strip() == f"effectgate {version('effectgate-cli')}"


@pytest.mark.parametrize(
    ("args", "said"),
    [("{not json", "--args is not JSON"), ("[1, 2]", "must be a JSON object, not list"), ('"x"', "not str")],
)
def test_call_refuses_arguments_that_are_not_a_json_object_with_exit_2(
    args: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(tmp_path))
    printed = CliRunner().invoke(
        app, ["call", "file_system", "read", "--args", args, "--nats-url", "nats://127.0.0.1:1"]
    )
    assert printed.exit_code == 2 and said in printed.output, printed.output


CALL_FLAWS = {
    "above-double": ('{"path": "a", "opts": {"list": [1, 1e400]}}', "/opts/list/1: NaN and infinity"),
    "nan": ('{"path": NaN}', "/path: NaN and infinity"),
    "lone-surrogate": ('{"path": "a\\ud800"}', "/path: string is not valid Unicode"),
    "lone-surrogate-key": ('{"o": {"\\udfff": 1}}', "/o: object key is not valid Unicode"),
    "invalid-utf8": (os.fsdecode(b'{"path": "\xff.txt"}'), "/path: invalid UTF-8 (byte 10)"),
    "big-integer": ('{"n": [2, 123456789012345678901234567890]}', "/n/1: integer beyond"),
    "too-deep": ('{"d": ' + "[" * 100 + "]" * 100 + "}", "/d" + "/0" * 63 + ": nested deeper"),
    "too-deep-for-the-decoder": ('{"d": ' + "[" * 5000 + "]" * 5000 + "}", "/d" + "/0" * 63 + ": nested deeper"),
    "syntax-error": ('{"a": [1, tru]}', "/a/1: not JSON"),
}


@pytest.mark.parametrize("name", list(CALL_FLAWS))
def test_call_refuses_a_value_no_request_can_carry_naming_its_pointer_with_exit_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, said = CALL_FLAWS[name]
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(tmp_path))
    printed = CliRunner().invoke(
        app, ["call", "file_system", "read", "--args", args, "--nats-url", "nats://127.0.0.1:1"]
    )
    assert printed.exit_code == 2, printed.output
    unwrapped = "".join(printed.output.split())  # rich wraps a long pointer anywhere
    assert "".join(f"--args value at {said}".split()) in unwrapped, printed.output


def test_call_refuses_a_principal_that_is_not_a_subject_token() -> None:
    printed = CliRunner().invoke(app, ["call", "t", "op", "--as", "a.b", "--nats-url", "nats://127.0.0.1:1"])
    assert printed.exit_code == 2 and "--as 'a.b' must match" in printed.output


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("15m", 900), ("1h", 3600), ("2d", 172800)])
def test_since_accepts_seconds_minutes_hours_days(text: str, seconds: int) -> None:
    assert parse_since(text).total_seconds() == seconds


@pytest.mark.parametrize("since", ["1w", "h", "-1h", "0m", "1.5h", "soon", ""])
def test_requests_refuses_a_since_that_is_not_a_duration_with_exit_2(since: str) -> None:
    printed = CliRunner().invoke(app, ["requests", "--since", since, "--nats-url", "nats://127.0.0.1:1"])
    assert printed.exit_code == 2 and "is not a duration" in printed.output and "30s, 15m, 1h, 2d" in printed.output


def test_did_you_mean_names_the_close_names_only() -> None:
    assert did_you_mean("file_sytem", ["file_system", "git"]) == "; did you mean 'file_system'?"
    assert did_you_mean("wirte", ["read", "write", "list"]) == "; did you mean 'write'?"
    assert did_you_mean("zzz", ["read", "write"]) == ""


def test_describe_shows_each_operation_its_class_risk_limits_and_schemas_within_80_columns() -> None:
    raw = json.loads((ROOT / "deploy/tools/file_system.json").read_text())
    tool = msgspec.convert(raw, ToolDescriptor)
    lines = _at_80(describe_tool(tool, {"state": "ready"}))
    shown = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert f"{tool.name} {tool.version}" in lines[0] and "state: ready" in shown
    for name, spec in tool.operations.items():
        assert f"operation {name}" in shown
        assert f"side-effect class: {spec.side_effect_class.value}" in shown
    assert shown.count("input schema:") == len(tool.operations) == shown.count("output schema:")
    assert "rate limit: " in shown and '"type": "object"' in shown


def test_alarms_as_json_does_not_follow() -> None:
    printed = CliRunner().invoke(app, ["audit", "alarms", "--json", "--follow", "--nats-url", "nats://127.0.0.1:1"])
    assert printed.exit_code == 2 and "does not --follow" in printed.output


def test_requests_show_outcome_call_principal_age_and_reason_within_80_columns() -> None:
    from datetime import UTC, datetime

    from rich.console import Group

    from effectgate.cli.commands.requests import _line

    reason = "the policy two-operators asks role operator for an approval of a reversible write " * 2
    items = [
        {"request_id": "0f" * 16, "principal": "a1-04", "requested_at": "2026-11-30T21:00:00.5Z", "tool": "fs"}
        | {"version": "1.0.0", "operation": "read", "outcome": "succeeded", "reason_code": "ok", "reason": "ran"},
        {"request_id": "r2", "principal": "a1-03", "requested_at": "2026-11-30T21:01:00Z", "tool": "fs"}
        | {"operation": "write", "verdict": "needs_approval", "reason_code": "needs_approval", "reason": reason},
    ]
    lines = _at_80(Group(*(_line(item, datetime(2026, 11, 30, 21, 5, tzinfo=UTC)) for item in items)))
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("succeeded fs@1.0.0.read  by a1-04")
    assert "2026-11-30 21:00:00 UTC (4m ago) · request " + "0f" * 16 in lines[1]
    assert any(line.startswith("pending   fs@latest.write  by a1-03") for line in lines)
    assert all(line.startswith("  ") for line in lines[lines.index("  ok: ran") + 2 :]), "wrapped reasons stay indented"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"adapter": "python:mod.fn"}, "invalid_adapter: {file}: adapter: 'python:mod.fn' is no adapter the executor"),
        ({"adapter": "file_system:x"}, "invalid_adapter: {file}: adapter: 'file_system:x'"),
        ({"amount": "/path"}, "invalid_pointer: {file}: operations.read.amount: '/path' names an argument of type"),
        ({"amount": "/cents"}, "invalid_pointer: {file}: operations.read.amount: '/cents': the input schema declares"),
        ({"destination": "/"}, "invalid_pointer: {file}: operations.read.destination:"),
    ],
)
def test_tools_publish_refuses_a_dangling_reference_before_signing_or_sending(
    change: dict[str, str], said: str, tmp_path: Path
) -> None:
    descriptor = json.loads((ROOT / "deploy/tools/file_system.json").read_text())
    if "adapter" in change:
        descriptor.update(change)
    else:
        descriptor["operations"]["read"].update(change)
    file = tmp_path / "tool.json"
    file.write_text(json.dumps(descriptor))

    printed = CliRunner().invoke(  # no key and no bus: a refusal must come before either is needed
        app,
        ["tools", "publish", str(file), "--key", str(tmp_path / "none.key"), "--nats-url", "nats://127.0.0.1:1"],
        env={"COLUMNS": "300"},
    )

    assert printed.exit_code == 1, printed.output
    assert said.format(file=file) in printed.output and "nothing was sent" in printed.output, printed.output


def test_the_uncertain_calls_fit_80_columns_and_name_their_resolution() -> None:
    from effectgate.cli.commands.uncertain import _table

    calls = [
        {
            "request_id": "req-" + "7" * 40,
            "principal": "payments-agent",
            "uncertain_at": "2026-12-04T10:00:00Z",
            "reason_code": "worker_lost",
            "tool": "ledger",
            "version": "1.0.0",
            "operation": "pay",
            "resolution": "not_run",
            "resolved_by": "operator",
        },
        {"request_id": "r2", "principal": "p", "uncertain_at": "2026-12-04T11:00:00Z", "reason_code": "timeout"},
    ]
    lines = _at_80(_table(calls))
    assert all(len(line) <= 80 for line in lines), lines
    text = "\n".join(lines)
    assert "not_run" in text and "operator" in text and "ledger@1.0.0/pay" in text and "7" * 40 in text


def test_resolving_without_the_operator_key_sends_nothing_and_exits_2(tmp_path: Path) -> None:
    printed = CliRunner().invoke(
        app,
        ["uncertain", "resolve", "r1", "--ran", "--principal", "p", "--key", str(tmp_path / "none.key")]
        + ["--nats-url", "nats://127.0.0.1:1"],
        env={"COLUMNS": "300"},  # a long temporary path is not folded
    )
    assert printed.exit_code == 2 and "none.key" in printed.output, printed.output


def test_the_audit_trail_shows_a_call_s_resolution() -> None:
    from effectgate.cli.render.views import trail_table

    payload = json.dumps({"type": "uncertain.resolved", "resolution": "ran", "resolved_by": "operator", "note": "bank"})
    record = {"sequence": 7, "occurred_at": "2026-12-04T10:00:00Z", "event_type": "uncertain.resolved"}
    record |= {"subject": "tg.resolution.p.r1", "payload": payload, "hash": "sha256:" + "ab" * 32}
    text = "\n".join(_at_80(trail_table("r1", [record])))
    assert "uncertain.resolved" in text and "resolution=ran" in text and "resolved_by=operator" in text
