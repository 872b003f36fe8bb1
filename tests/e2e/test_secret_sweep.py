"""The secret-leak sweep: sentinel secrets in sealed arguments, tool results and tool errors
appear in no byte the system writes, while ordinary look-alikes pass through unchanged.

One stack, traced (every service exports its spans over OTLP/HTTP to a collector this
module runs): a ``file_system`` whose ``write.content`` is ``writeOnly`` (sealed by the SDK),
and a scripted MCP server whose tools fail with, flag, and return credentials — a database
URL's password, a token, and values the operator configured (the server's ``env``, a line of
``EFFECTGATE_EXECUTOR_SECRETS_FILE``). After the calls, every message of every stream (the
tools bucket included), every Redis key and value, every file under the state directory
(the JetStream store, the audit database, every service log) and every exported span is
searched for each sentinel, its JSON form and their base64.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from effectgate.contracts.bus import catalog

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[1] / "fixtures" / "mcp" / "scripted_server.py"
READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}

SEALED = "sealed-SENTINEL-Arg-7731"
APPROVED = "approved-SENTINEL-Arg-4417"
DSN = "dsnSENTINELpass9Q"
TOKEN = "TkSENTINEL4mQ9zL2xV8"
ENV_SECRET = "env-SENTINEL-Credential-5150"
FILE_SECRET = "file-SENTINEL-Credential-2112"
SENTINELS = (SEALED, APPROVED, DSN, TOKEN, ENV_SECRET, FILE_SECRET)
LOOK_ALIKES = (
    "Your new password: please choose one with 12 characters",
    "Reset it here: https://example.com/reset?token=9f8e7d6c5b4a",
    "model: sk-learn-model-selection-gridsearch",
    "token: refresh_on_expiry",
    "Your link: https://example.com/password-reset/token=?asfbuy3y2cdaqhvei",
    '{"message": "Password updated."}',
    "Rate limiting uses a token bucket: 5 calls refill per minute.",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f, id 123e4567-e89b-12d3-a456-426614174000",
)
TOOLS = [
    {"name": "fails", "behaviour": "rpc_error", "message": f"postgres://app:{DSN}@db/x refused token={TOKEN}"},
    {"name": "flags", "behaviour": "is_error", "message": f"denied for {ENV_SECRET}"},
    {"name": "answers", "behaviour": "reply", "reply": json.dumps({"dsn": f"redis://:{DSN}@c", "k": FILE_SECRET})},
    {"name": "benign", "behaviour": "reply", "reply": "\n".join(LOOK_ALIKES)},
]


class _Collector(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def spans() -> Iterator[tuple[str, list[bytes]]]:
    """An OTLP/HTTP collector on a free port: its URL, and every body posted to it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.received
    server.shutdown()


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path, spans: tuple[str, list[bytes]]) -> dict[str, str]:
    work = Path(e2e_paths.state).parent / "sweep"
    (work / "tools").mkdir(parents=True, exist_ok=True)
    descriptor = json.loads((repo_root / "deploy/tools/file_system.json").read_text())
    descriptor["operations"]["write"]["input_schema"]["properties"]["content"]["writeOnly"] = True
    (work / "tools" / "file_system.json").write_text(json.dumps(descriptor))
    tools = [{"description": f"{t['name']} tool", "inputSchema": SCHEMA, "annotations": READ_ONLY, **t} for t in TOOLS]
    (work / "leaky.json").write_text(json.dumps({"version": "1.0.0", "workdir": str(work), "tools": tools}))
    servers = work / "servers.toml"
    servers.write_text(
        f'[servers.leaky]\ncommand = "{sys.executable}"\nargs = {json.dumps([str(SCRIPT), str(work / "leaky.json")])}\n'
        f'trust_hints = true\nenv = {{ LEAKY_API_CREDENTIAL = "{ENV_SECRET}" }}\n'
    )
    (work / "secrets.txt").write_text(f"{FILE_SECRET}\n")
    return {
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(work / "tools"),
        "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": str(servers),
        "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": str(servers),
        "EFFECTGATE_EXECUTOR_SECRETS_FILE": str(work / "secrets.txt"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": spans[0],
    }


def _needles() -> dict[bytes, str]:
    found = {}
    for secret in SENTINELS:
        for form in (secret.encode(), json.dumps(secret).encode()):
            for variant in (form, base64.b64encode(form), base64.b64encode(form).rstrip(b"=")):
                found[variant] = secret
    return found


def _leaks(where: str, data: bytes, found: dict[str, set[str]]) -> None:
    for needle, secret in _needles().items():
        if needle in data:
            found.setdefault(secret, set()).add(where)


async def _streams(gate: Any, found: dict[str, set[str]]) -> int:
    searched = 0
    for info in await gate.js.streams_info():
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                message = await gate.js.get_msg(info.config.name, seq)
            except Exception:  # a deleted or purged sequence
                continue
            data = (message.data or b"") + repr(message.headers).encode() + (message.subject or "").encode()
            if info.config.name == catalog.RESULTS_STREAM:
                data += gzip.decompress(message.data or b"")
            _leaks(f"stream {info.config.name}#{seq}", data, found)
            searched += 1
    return searched


async def _redis(url: str, found: dict[str, set[str]]) -> int:
    client = redis.from_url(url)
    searched = 0
    try:
        async for key in client.scan_iter(count=500):
            _leaks(f"redis {key!r}", key + (await client.dump(key) or b""), found)
            searched += 1
    finally:
        await client.aclose()
    return searched


def _files(directory: Path, found: dict[str, set[str]]) -> int:
    files = [path for path in directory.rglob("*") if path.is_file()]
    for path in files:
        _leaks(str(path), path.read_bytes(), found)
    return len(files)


async def _calls(gate: Any, new_id: Any) -> dict[str, Any]:
    direct, waiting = await gate.connect(gate.agent(2)), await gate.connect(gate.agent(1))
    try:
        done = {
            "direct": await direct.invoke("file_system", "write", {"path": new_id("s-") + ".txt", "content": SEALED})
        }
        held = await waiting.submit("file_system", "write", {"path": new_id("a-") + ".txt", "content": APPROVED})
        pending = await gate.pending(held)
        assert (await gate.decide("alice", pending["approval_id"]))["ok"]
        done["approved"] = await waiting.receipt(held, timeout_s=30)
        for tool in ("fails", "flags", "answers", "benign"):
            done[tool] = await direct.invoke("mcp_leaky", tool, {"name": "x"}, idempotency_key=new_id("k"))
    finally:
        await direct.close()
        await waiting.close()
    return done


async def test_no_sentinel_anywhere_and_look_alikes_unchanged(
    gate: Any, new_id: Any, spans: tuple[str, list[bytes]]
) -> None:
    done = await _calls(gate, new_id)
    assert (done["direct"].outcome, done["approved"].outcome) == ("succeeded", "succeeded")
    written = [path.read_text() for path in gate.paths.sandbox.glob("[sa]-*.txt")]
    assert sorted(written) == sorted([SEALED, APPROVED]), "the tool received the plaintext"
    assert (done["fails"].redactions, done["flags"].redactions) == (("/reason",), ("/reason",))
    assert done["answers"].redactions == ("/result/content/0/text",)
    assert done["benign"].result["content"][0]["text"] == "\n".join(LOOK_ALIKES)
    assert done["benign"].redactions == ()
    await gate.settle()
    await asyncio.sleep(6.0)  # the span processors export every 5 s

    found: dict[str, set[str]] = {}
    searched = {
        "stream messages": await _streams(gate, found),
        "redis keys": await _redis(gate.stack.redis_url, found),
        "state files": _files(gate.paths.state, found),
    }
    for index, body in enumerate(spans[1]):
        _leaks(f"span export #{index}", body, found)
    assert all(searched.values()) and spans[1], (searched, len(spans[1]))
    assert found == {}, f"sentinels found: {found}"
