"""The operator's and the tester's commands against a running stack, as processes, at 80 columns.

``effectgate call`` calls as an agent through the gateway (exit code by outcome), ``requests``
reads recent requests from the audit, ``approvals list`` stacks one block per approval, ``tools
describe`` shows a tool, ``withdraw`` ends an agent's own call waiting for approval; each
``--json`` parses, and a mistyped tool or operation gets a suggestion.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from effectgate.cli.commands.call import EXIT_CODES, NO_RECEIPT

pytestmark = pytest.mark.e2e

EFFECTGATE = str(Path(sys.executable).parent / "effectgate")
READ = ("call", "file_system", "read", "--args", '{"path": "hello.txt"}')


def _effectgate(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    env.update({"NATS_URL": stack.nats_url, "EFFECTGATE_STATE_DIR": str(stack.state_dir), "COLUMNS": "80"})
    return subprocess.run([EFFECTGATE, *args], env=env, capture_output=True, text=True, timeout=120)


def _words(text: str) -> str:
    """``text`` with its line breaks (wrapping at 80 columns) as single spaces."""
    return " ".join(text.split())


def _within_80(text: str) -> None:
    assert max(len(line) for line in text.splitlines()) <= 80, text


def test_call_prints_the_receipt_and_exits_by_its_outcome(stack: Any) -> None:
    done = _effectgate(stack, *READ, "--as", "a1-00")
    assert done.returncode == EXIT_CODES["succeeded"] == 0, done.stderr
    assert "succeeded" in done.stdout and "hello from the sandbox" in done.stdout
    _within_80(done.stdout)
    outside = _effectgate(
        stack, "call", "file_system", "read", "--args", '{"path": "../outside/secret.txt"}', "--as", "a1-00"
    )
    assert outside.returncode in (EXIT_CODES["denied"], EXIT_CODES["refused"], EXIT_CODES["failed"]), outside.stdout
    assert "outside secret" not in outside.stdout


def test_call_json_is_the_receipt(stack: Any) -> None:
    done = _effectgate(stack, *READ, "--as", "a1-01", "--json")
    receipt = json.loads(done.stdout)
    assert done.returncode == 0 and receipt["outcome"] == "succeeded" and receipt["principal"] == "a1-01"


def test_a_mistyped_tool_or_operation_gets_a_suggestion_and_nothing_is_sent(stack: Any) -> None:
    tool = _effectgate(stack, "call", "file_sytem", "read", "--args", "{}", "--as", "a1-02")
    assert tool.returncode == 2 and "did you mean 'file_system'?" in _words(tool.stderr)
    operation = _effectgate(stack, "call", "file_system", "raed", "--args", "{}", "--as", "a1-02")
    assert operation.returncode == 2 and "did you mean 'read'?" in _words(operation.stderr)


def test_describing_a_mistyped_tool_gets_a_suggestion(stack: Any) -> None:
    described = _effectgate(stack, "tools", "describe", "file_sytem")
    assert described.returncode == 1 and "did you mean 'file_system'?" in _words(described.stderr)


def test_a_call_waiting_for_approval_is_listed_in_one_block_within_80_columns(stack: Any) -> None:
    write = ("call", "file_system", "write", "--args", '{"path": "cli.txt", "content": "from the cli"}')
    waiting = _effectgate(stack, *write, "--as", "a1-03", "--wait", "2")
    assert waiting.returncode == NO_RECEIPT and "may be waiting for an approval" in _words(waiting.stderr)
    listed = _listed(stack, "a1-03")
    assert listed["request"]["arguments"] == {"path": "cli.txt", "content": "from the cli"}
    shown = _effectgate(stack, "approvals", "list")
    assert shown.returncode == 0 and listed["approval_id"] in shown.stdout
    _within_80(shown.stdout)
    block = shown.stdout[shown.stdout.index(listed["approval_id"]) :]
    for label in ("tool", "operation", "principal", "risk", "requested", "quorum", "arguments", "hash"):
        assert f"  {label} " in block, label
    assert "a1-03" in block and "ago)" in block
    assert listed["request_hash"][:19] + "…" in block, "shortened in text; whole in --json (listed)"


def test_a_call_still_waiting_tells_its_key_and_the_same_command_with_it_gets_the_outcome(
    stack: Any, e2e_paths: Any
) -> None:
    write = ("call", "file_system", "write", "--args", '{"path": "later.txt", "content": "once"}', "--as", "a1-05")
    waiting = _effectgate(stack, *write, "--wait", "2", "--json")
    told = _words(waiting.stderr)
    document = json.loads(waiting.stdout)
    assert document["outcome"] is None and re.fullmatch(r"[0-9a-f]{32}", document["idempotency_key"]), document
    assert waiting.returncode == NO_RECEIPT and "effectgate approvals list" in told, told
    key = re.search(r"--key ([0-9a-f]{32})", told)
    assert key is not None and key[1] == document["idempotency_key"], told
    approved = _effectgate(stack, "approvals", "approve", _listed(stack, "a1-05")["approval_id"], "--as", "alice")
    assert approved.returncode == 0, approved.stderr

    again = _effectgate(stack, *write, "--key", key[1], "--wait", "30")

    assert again.returncode == 0 and again.stdout.split()[0] in ("succeeded", "replayed"), again.stdout + again.stderr
    assert (e2e_paths.sandbox / "later.txt").read_text() == "once"


def _listed(stack: Any, principal: str, timeout_s: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = _effectgate(stack, "approvals", "list", "--json")
        assert done.returncode == 0, done.stderr
        found = [item for item in json.loads(done.stdout) if item["principal"] == principal]
        if found:
            return dict(found[0])
    raise AssertionError(f"no pending approval of {principal}")


def test_requests_lists_recent_calls_with_their_outcome(stack: Any) -> None:
    assert _effectgate(stack, *READ, "--as", "a1-04").returncode == 0
    deadline = time.monotonic() + 15
    while True:
        done = _effectgate(stack, "requests", "--principal", "a1-04", "--since", "1h", "--json")
        found = json.loads(done.stdout)
        if (found and found[0]["outcome"]) or time.monotonic() > deadline:
            break
    assert [(item["principal"], item["outcome"], item["operation"]) for item in found] == [
        ("a1-04", "succeeded", "read")
    ]
    shown = _effectgate(stack, "requests", "--principal", "a1-04", "--since", "15m")
    assert shown.returncode == 0 and "succeeded" in shown.stdout and "file_system@" in shown.stdout
    _within_80(shown.stdout)
    assert found[0]["request_id"] in shown.stdout


def test_tools_describe_within_80_columns(stack: Any) -> None:
    shown = _effectgate(stack, "tools", "describe", "file_system")
    assert shown.returncode == 0, shown.stderr
    _within_80(shown.stdout)
    for text in ("operation read", "operation write", "side-effect class:", "risk tier:", "input schema:"):
        assert text in shown.stdout


def test_tools_describe_and_list_as_json(stack: Any) -> None:
    described = json.loads(_effectgate(stack, "tools", "describe", "file_system", "--json").stdout)
    listed = json.loads(_effectgate(stack, "tools", "list", "--json").stdout)
    assert described["name"] == "file_system" and "file_system" in [tool["name"] for tool in listed]


def test_audit_alarms_lists_as_json(stack: Any) -> None:
    done = _effectgate(stack, "audit", "alarms", "--json")
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), list)


def test_withdraw_ends_a_call_waiting_for_approval_and_only_once(stack: Any) -> None:
    write = ("call", "file_system", "write", "--args", '{"path": "withdrawn.txt", "content": "never"}')
    waiting = _effectgate(stack, *write, "--as", "a1-06", "--wait", "2", "--json")
    request_id = json.loads(waiting.stdout)["request_id"]
    _listed(stack, "a1-06")
    other = _effectgate(stack, "withdraw", request_id, "--as", "a1-07")
    assert other.returncode == 1 and "not_pending" in other.stderr, other.stderr
    done = _effectgate(stack, "withdraw", request_id, "--as", "a1-06", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["reason_code"] == "withdrawn", done.stderr
    again = _effectgate(stack, "withdraw", request_id, "--as", "a1-06")
    assert again.returncode == 1 and "not_pending" in again.stderr, again.stderr
    deadline = time.monotonic() + 15
    while True:
        [found] = json.loads(_effectgate(stack, "requests", "--principal", "a1-06", "--json").stdout)
        if found["outcome"] or time.monotonic() > deadline:
            break
    assert (found["request_id"], found["outcome"], found["reason_code"]) == (request_id, "denied", "withdrawn")
