"""Secrets from a tool never reach the stream, the idempotency index, the audit database or the logs.

A scripted MCP server answers with errors and results that carry a database URL with its
password, a token, and credentials the operator configured (the server's ``env`` value and
a line of ``EFFECTGATE_EXECUTOR_SECRETS_FILE``) that no detector could recognise. After the
calls, every message of the streams, every Redis value and every byte of the audit
database and of the service logs (the server's own stderr included) is searched for them.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from effectgate.contracts.bus import catalog

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}

DSN_PASSWORD = "Hx7-dsn-pass-9Q"
TOKEN = "Tk4mQ9zL2xV8pR6w"
ENV_SECRET = "env-only-Credential-5150"
FILE_SECRET = "file-only-Credential-2112"
SECRETS = (DSN_PASSWORD, TOKEN, ENV_SECRET, FILE_SECRET)
LEAK = f"cannot reach postgres://app:{DSN_PASSWORD}@db.internal/orders (token={TOKEN}, key {ENV_SECRET})"
RESULT = {"rows": [{"dsn": f"postgres://app:{DSN_PASSWORD}@db/x"}], "note": f"signed with {FILE_SECRET}"}

TOOLS = [
    {"name": "fails", "behaviour": "rpc_error", "message": LEAK},
    {"name": "flags", "behaviour": "is_error", "message": f"denied: {FILE_SECRET} token={TOKEN}"},
    {"name": "answers", "behaviour": "reply", "reply": json.dumps(RESULT), "stderr": f"debug: {LEAK}"},
]


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any) -> dict[str, str]:
    directory = Path(e2e_paths.state).parent / "mcp-secrets"
    directory.mkdir(exist_ok=True)
    tools = [{"description": f"{t['name']} tool", "inputSchema": SCHEMA, "annotations": READ_ONLY, **t} for t in TOOLS]
    definitions = directory / "leaky.json"
    definitions.write_text(json.dumps({"version": "1.0.0", "workdir": str(directory), "tools": tools}))
    arguments = json.dumps([str(SCRIPT), str(definitions)])
    servers = directory / "servers.toml"
    servers.write_text(
        f'[servers.leaky]\ncommand = "{sys.executable}"\nargs = {arguments}\ntrust_hints = true\n'
        f'env = {{ LEAKY_API_CREDENTIAL = "{ENV_SECRET}" }}\n'
    )
    secrets = directory / "secrets.txt"
    secrets.write_text(f"short\n{FILE_SECRET}\n")
    return {
        "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": str(servers),
        "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": str(servers),
        "EFFECTGATE_EXECUTOR_SECRETS_FILE": str(secrets),
    }


def _leaks(data: bytes) -> list[str]:
    return [secret for secret in SECRETS if secret.encode() in data]


async def _stream_leaks(gate: Any, stream: str) -> dict[int, list[str]]:
    last = (await gate.js.stream_info(stream)).state.last_seq
    found: dict[int, list[str]] = {}
    for seq in range(1, last + 1):
        message = await gate.js.get_msg(stream, seq)
        data = (message.data or b"") + json.dumps(message.headers or {}).encode()
        if stream == catalog.RESULTS_STREAM:
            data = gzip.decompress(message.data or b"")
        if leaks := _leaks(data):
            found[seq] = leaks
    return found


async def _redis_leaks(url: str) -> dict[bytes, list[str]]:
    client = redis.Redis.from_url(url)
    found: dict[bytes, list[str]] = {}
    try:
        async for key in client.scan_iter(count=500):
            dumped = await client.dump(key) or b""
            if leaks := _leaks(key + dumped):
                found[key] = leaks
    finally:
        await client.aclose()
    return found


def _file_leaks(directory: Path) -> dict[str, list[str]]:
    return {
        str(path): leaks for path in directory.rglob("*") if path.is_file() and (leaks := _leaks(path.read_bytes()))
    }


async def test_no_secret_from_a_tool_is_written_anywhere(gate: Any, new_id: Any) -> None:
    agent = gate.agent(1)
    failed = await gate.call(agent, "fails", {"name": "x"}, tool="mcp_leaky", key=new_id("k"))
    flagged = await gate.call(agent, "flags", {"name": "x"}, tool="mcp_leaky", key=new_id("k"))
    answered = await gate.call(agent, "answers", {"name": "x"}, tool="mcp_leaky", key=new_id("k"))
    await gate.settle()

    assert await _stream_leaks(gate, catalog.STREAM) == {}
    assert await _stream_leaks(gate, catalog.RESULTS_STREAM) == {}
    assert await _redis_leaks(gate.stack.redis_url) == {}
    assert _file_leaks(gate.paths.state) == {}, "a secret is in the audit database, a log or another state file"
    assert (failed.outcome, failed.reason_code, failed.redactions) == ("failed", "tool_error", ("/reason",))
    assert "postgres://app:[redacted:url_password sha256:" in failed.reason
    assert "[redacted:configured sha256:" in failed.reason
    assert (flagged.outcome, flagged.redactions) == ("failed", ("/reason",)), flagged.reason
    assert answered.outcome == "succeeded" and answered.redactions == ("/result/content/0/text",)
    text = answered.result["content"][0]["text"]
    assert "[redacted:url_password sha256:" in text and "[redacted:configured sha256:" in text
