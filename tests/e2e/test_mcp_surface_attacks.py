"""The MCP surface under attack, on a secured stack: each test asserts the safe behaviour.

Identity (claims in headers, ``_meta``, arguments and params; reading, cancelling and listing
another principal's calls; the surface's own NATS user), the calls ledger across two replicas
(simultaneous re-sends, a replica killed while holding a call, a reused client key, hostile
``_meta``), bad input on HTTP and stdio, settings that must be refused, and results (secrets,
the size limit, ``effectgate_result`` with hostile offsets and ids).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import nats
import pytest

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.nats_credentials import credentials_file, load_credentials
from effectgate.contracts.bus.nats_permissions import MCP_SURFACE, agent_user
from effectgate.devstack.timing import scaled
from effectgate.surface.adapters.tokens import token_digest

from .support import Gate, Paths
from .surface_support import Surfaces, free_port, http_client, read_whole

pytestmark = [pytest.mark.e2e, pytest.mark.timing]

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 2048
SESSION = "victim-session-0123456789"
DSN_PASSWORD = "Hx7-dsn-pass-9Q"
GITHUB = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture(scope="module")
def url(surfaces: Surfaces) -> str:
    return surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2", EFFECTGATE_SURFACE_RESULT_LIMIT_BYTES=str(LIMIT))


@pytest.fixture(scope="module")
def replicas(surfaces: Surfaces) -> list[str]:
    return [surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2") for _ in range(2)]


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _headers(token: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return {**headers, **(extra or {})}


async def post(url: str, token: str | None, body: bytes, extra: dict[str, str] | None = None) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=60) as http:
        return await http.post(url, content=body, headers=_headers(token, extra))


def messages(answer: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response (plain JSON or an SSE stream)."""
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return [json.loads(text)] if text.strip() else []


def call_body(name: str, arguments: Any, rpc_id: Any = 1, **params: Any) -> bytes:
    body = {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    body["params"].update(params)
    return json.dumps(body).encode()


async def raw_call(url: str, token: str, name: str, arguments: Any, **options: Any) -> dict[str, Any]:
    """One ``tools/call`` over plain HTTP; its JSON-RPC response."""
    extra = options.pop("headers", None)
    answer = await post(url, token, call_body(name, arguments, **options), extra)
    found = [m for m in messages(answer) if "result" in m or "error" in m]
    assert found, (answer.status_code, answer.text[:500])
    return found[-1]


def result_text(message: dict[str, Any]) -> str:
    content = message.get("result", {}).get("content", [])
    return "\n".join(block.get("text", "") for block in content)


async def still_serves(url: str, token: str) -> None:
    async with http_client(url, token, "legacy") as client:
        read = await client.call_tool("file_system__read", {"path": "hello.txt"})
    assert read.is_error is False, text_of(read)


async def pending_of(gate: Gate, principal: str, timeout_s: float = 15.0) -> dict[str, Any]:
    for _ in range(int(timeout_s * 10)):
        listed = [item for item in await gate.approvals() if item["principal"] == principal]
        if listed:
            return dict(listed[0])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending approval of {principal}")


class Violations:
    """A NATS connection's asynchronous errors (permission violations arrive here)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

        async def record(error: Exception) -> None:
            self.seen.append(str(error))

        self.callback = record

    async def wait_for(self, words: str, timeout_s: float = 5.0) -> bool:
        for _ in range(int(scaled(timeout_s) * 20)):
            if any(words.lower() in seen.lower() for seen in self.seen):
                return True
            await asyncio.sleep(0.05)
        return False


async def connect_as(stack: Stack, user: str) -> tuple[Any, Violations]:
    violations = Violations()
    options = load_credentials(credentials_file(stack.state_dir / "credentials", user))
    nc = await nats.connect(stack.nats_url, error_cb=violations.callback, allow_reconnect=False, **options)
    return nc, violations


# ---------------------------------------------------------------- identity


async def test_identity_claimed_in_headers_meta_and_params_grants_nothing(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    caller, victim = gate.agent(), gate.agent()
    token = surfaces.token_of(caller)
    claims = {"principal": victim, "io.effectgate/principal": victim, "client_id": victim}
    headers = {"X-Effectgate-Principal": victim, "X-Principal": victim, "X-Forwarded-User": victim}
    answer = await raw_call(url, token, "file_system__read", {"path": "hello.txt"}, headers=headers, _meta=claims)
    assert answer["result"]["isError"] is False
    extra = await raw_call(url, token, "file_system__read", {"path": "hello.txt"}, rpc_id=2, principal=victim)
    assert "error" in extra or extra["result"]["isError"] is False
    argued = await raw_call(url, token, "file_system__read", {"path": "hello.txt", "principal": victim}, rpc_id=3)
    assert "error" in argued or argued["result"]["isError"] is True
    assert await gate.count(Subjects.request(victim)) == 0
    assert await gate.count(Subjects.request(caller)) >= 1


async def test_a_token_for_a_reads_no_cut_result_of_b_at_any_offset(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    owner, thief, name = gate.agent(), gate.agent(), f"{new_id('b')}.txt"
    (e2e_paths.sandbox / name).write_text("owner-only-data " * 400)
    async with http_client(url, surfaces.token_of(owner), "legacy") as client:
        cut = await client.call_tool("file_system__read", {"path": name})
    request_id = (cut.meta or {})["io.effectgate/receipt"]["request_id"]
    async with http_client(url, surfaces.token_of(thief), "legacy") as client:
        for offset in (0, LIMIT, 10):
            stolen = await client.call_tool("effectgate_result", {"request_id": request_id, "offset_bytes": offset})
            assert stolen.is_error is True and "owner-only-data" not in text_of(stolen)


async def test_a_cannot_cancel_bs_pending_call_with_bs_client_id_and_json_rpc_id(
    gate: Gate, surfaces: Surfaces, new_id: Any
) -> None:
    owner, attacker = gate.agent(), gate.agent()
    held = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="6")
    session = {"Mcp-Session-Id": SESSION}
    arguments = {"path": f"{new_id('v')}.txt", "content": "keep me\n"}
    call = asyncio.create_task(
        raw_call(held, surfaces.token_of(owner), "file_system__write", arguments, rpc_id=7, headers=session)
    )
    item = await pending_of(gate, owner)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "x"}}
    answer = await post(held, surfaces.token_of(attacker), json.dumps(cancel).encode(), session)
    assert answer.status_code < 500
    outcome = await call
    assert "pending approval" in result_text(outcome), outcome
    assert await gate.is_pending(item["request_id"])
    await gate.decide("bob", item["approval_id"], approve=False)


async def test_a_listing_is_the_tokens_principal_whatever_the_request_claims(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    low, high = gate.agent(1), gate.agent(2)
    own = await raw_call(url, surfaces.token_of(low), "x", {})  # warm-up: the principal is connected
    assert own
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"principal": high}}})
    claimed = messages(await post(url, surfaces.token_of(low), body.encode(), {"X-Effectgate-Principal": high}))
    plain = messages(await post(url, surfaces.token_of(low), body.encode()))
    assert claimed[-1]["result"]["tools"] == plain[-1]["result"]["tools"]


async def test_the_surface_user_cannot_send_requests_or_read_receipts(gate: Gate) -> None:
    victim = gate.agent()
    await gate.call(victim, "read", {"path": "hello.txt"})
    nc, violations = await connect_as(gate.stack, MCP_SURFACE)
    try:
        await nc.publish(Subjects.request(victim), b'{"forged": true}')
        assert await violations.wait_for("permissions violation for publish")
        await nc.subscribe(f"tg.receipt.{victim}.>")
        assert await violations.wait_for("permissions violation for subscription")
        with pytest.raises(Exception):  # noqa: B017 - any refusal; a receipt must not come back
            await nc.jetstream().get_last_msg(catalog.STREAM, f"tg.receipt.{victim}.*", direct=True)
    finally:
        await nc.close()
    assert await gate.count(Subjects.request(victim)) == 1


async def test_an_agent_cannot_publish_cancellations_or_write_the_ledger(gate: Gate) -> None:
    attacker, victim = gate.agent(), gate.agent()
    nc, violations = await connect_as(gate.stack, agent_user(attacker))
    try:
        await nc.publish(Subjects.mcp_cancel(victim), b'{"client": "' + SESSION.encode() + b'", "id": 7}')
        assert await violations.wait_for(f'publish to "{Subjects.mcp_cancel(victim)}"')
        await nc.publish(f"$KV.{catalog.MCP_CALLS_BUCKET}.{victim}.abc", b"{}")
        assert await violations.wait_for(f"$kv.{catalog.MCP_CALLS_BUCKET.lower()}")
    finally:
        await nc.close()


# ---------------------------------------------------------------- the ledger


async def test_two_identical_writes_at_once_on_two_replicas_are_one_request_and_one_run(
    gate: Gate, surfaces: Surfaces, replicas: list[str], e2e_paths: Paths, new_id: Any
) -> None:
    principal, name = gate.agent(), f"{new_id('twin')}.txt"
    token, arguments = surfaces.token_of(principal), {"path": name, "content": "once\n"}
    first, second = await asyncio.gather(
        *(raw_call(replica, token, "file_system__write", arguments) for replica in replicas)
    )
    held = [m["result"]["_meta"]["io.effectgate/pending"] for m in (first, second)]
    assert held[0] == held[1]
    assert (await gate.decide("bob", held[0]["approval_id"]))["ok"]
    outcomes = await asyncio.gather(
        *(raw_call(replica, token, "file_system__write", arguments) for replica in replicas)
    )
    assert all(o["result"]["isError"] is False for o in outcomes), outcomes
    assert (e2e_paths.sandbox / name).read_text() == "once\n"
    assert await gate.count(Subjects.request(principal)) == 1
    assert await gate.count(f"tg.receipt.{principal}.*") == 1


async def test_a_replica_killed_holding_a_pending_call_the_resend_elsewhere_gets_the_outcome_once(
    gate: Gate, surfaces: Surfaces, replicas: list[str], e2e_paths: Paths, new_id: Any
) -> None:
    principal, name = gate.agent(), f"{new_id('kill')}.txt"
    token, arguments = surfaces.token_of(principal), {"path": name, "content": "survives\n"}
    doomed = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="120")
    call = asyncio.create_task(raw_call(doomed, token, "file_system__write", arguments))
    item = await pending_of(gate, principal)
    surfaces.processes[-1].send_signal(signal.SIGKILL)
    surfaces.processes[-1].wait()
    with pytest.raises(Exception):  # noqa: B017 - the connection of the killed replica breaks
        await call
    assert (await gate.decide("bob", item["approval_id"]))["ok"]
    outcome = await raw_call(replicas[0], token, "file_system__write", arguments)
    assert outcome["result"]["isError"] is False, outcome
    assert outcome["result"]["_meta"]["io.effectgate/receipt"]["request_id"] == item["request_id"]
    assert (e2e_paths.sandbox / name).read_text() == "survives\n"
    assert await gate.count(Subjects.request(principal)) == 1


async def test_a_client_key_reused_with_other_arguments_on_another_replica_is_refused(
    gate: Gate, surfaces: Surfaces, replicas: list[str], new_id: Any
) -> None:
    principal, key = gate.agent(), {"io.effectgate/idempotency-key": new_id("k")}
    token = surfaces.token_of(principal)
    first = await raw_call(replicas[0], token, "file_system__write", {"path": "k1.txt", "content": "a"}, _meta=key)
    other = await raw_call(replicas[1], token, "file_system__write", {"path": "k2.txt", "content": "b"}, _meta=key)
    assert "pending approval" in result_text(first)
    assert other["result"]["isError"] is True and "idempotency_key_reused" in result_text(other)
    assert await gate.count(Subjects.request(principal)) == 1
    await gate.decide("bob", first["result"]["_meta"]["io.effectgate/pending"]["approval_id"], approve=False)


async def test_a_client_key_reused_for_another_tool_with_the_same_arguments_is_not_the_first_calls_outcome(
    gate: Gate, surfaces: Surfaces, url: str, new_id: Any
) -> None:
    token, key = surfaces.token_of(gate.agent()), {"io.effectgate/idempotency-key": new_id("k")}
    arguments = {"path": "notes"}
    listed = await raw_call(url, token, "file_system__list", arguments, _meta=key)
    other = await raw_call(url, token, "file_system__read", arguments, rpc_id=2, _meta=key)
    first = listed["result"]["_meta"]["io.effectgate/receipt"]["request_id"]
    refused = other["result"]["isError"] is True and "idempotency_key_reused" in result_text(other)
    second = other["result"].get("_meta", {}).get("io.effectgate/receipt", {}).get("request_id")
    assert refused or second != first, other


HOSTILE_KEYS = [7, 1.5, True, ["k"], {"k": "v"}, "", "k" * 10_000, {"a": {"b": {"c": [1, [2, [3]]]}}}]


@pytest.mark.parametrize("value", HOSTILE_KEYS, ids=lambda v: type(v).__name__ + str(len(json.dumps(v))))
async def test_a_hostile_client_key_is_refused_by_name_and_sends_nothing(
    gate: Gate, surfaces: Surfaces, url: str, value: Any
) -> None:
    principal = gate.agent()
    answer = await raw_call(
        url,
        surfaces.token_of(principal),
        "file_system__read",
        {"path": "hello.txt"},
        _meta={"io.effectgate/idempotency-key": value},
    )
    said = answer.get("error", {}).get("message", "") + result_text(answer)
    assert "io.effectgate/idempotency-key" in said, answer
    assert await gate.count(Subjects.request(principal)) == 0


async def test_other_hostile_meta_is_ignored_and_the_call_runs(gate: Gate, surfaces: Surfaces, url: str) -> None:
    nested: Any = "leaf"
    for _ in range(60):
        nested = {"n": nested}
    meta = {"huge": "m" * 300_000, "number": 1e308, "nested": nested, "progressToken": {"x": 1}}
    answer = await raw_call(
        url, surfaces.token_of(gate.agent()), "file_system__read", {"path": "hello.txt"}, _meta=meta
    )
    assert "error" in answer or answer["result"]["isError"] is False
    await still_serves(url, surfaces.token_of(gate.agent()))


# ---------------------------------------------------------------- bad input over HTTP


def _deep(depth: int) -> bytes:
    return b'{"path": "hello.txt", "x": ' + b"[" * depth + b"]" * depth + b"}"


BAD_BODIES = {
    "truncated": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {',
    "batch": b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]',
    "arguments-list": call_body("file_system__read", [1, 2]),
    "arguments-string": call_body("file_system__read", "hello.txt"),
    "unknown-method": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/format_disk", "params": {}}',
    "no-version": b'{"id": 1, "method": "tools/list"}',
    "id-object": b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}',
    "invalid-utf8": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "file_system__read", '
    b'"arguments": {"path": "\xff\xfe.txt"}}}',
    "lone-surrogate": call_body("file_system__read", {"path": "\ud800.txt"}),
    "deep-args": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "file_system__read", '
    b'"arguments": ' + _deep(5000) + b"}}",
    "deep-body": b"[" * 200_000 + b"]" * 200_000,
    "huge-number": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "file_system__read", '
    b'"arguments": {"path": "hello.txt", "n": ' + b"9" * 5000 + b"}}}",
    "infinity": b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "file_system__read", '
    b'"arguments": {"path": "hello.txt", "n": 1e999}}}',
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
async def test_bad_input_gets_a_refusal_that_names_it_and_the_surface_keeps_serving(
    gate: Gate, surfaces: Surfaces, url: str, name: str
) -> None:
    token = surfaces.token_of(gate.agent(2))
    answer = await post(url, token, BAD_BODIES[name])
    assert answer.status_code < 500, (answer.status_code, answer.text[:300])
    said = [m.get("error", {}).get("message", "") or result_text(m) for m in messages(answer)] if answer.text else []
    refusal = answer.status_code >= 400 or any(
        "error" in m or m.get("result", {}).get("isError") for m in messages(answer)
    )
    assert refusal and (answer.text.strip() if answer.status_code >= 400 else any(said)), (
        name,
        answer.status_code,
        answer.text[:300],
    )
    assert "Internal" not in answer.text[:300], answer.text[:300]
    await still_serves(url, token)


NAMED_AT = {
    "lone-surrogate": "value at /params/arguments/path: string is not valid Unicode",
    "invalid-utf8": "value at /params/arguments/path: invalid UTF-8",
    "deep-args": "value at /params/arguments/x" + "/0" * 61 + ": nested deeper",
    "huge-number": "value at /params/arguments/n: integer beyond",
    "infinity": "argument value at /n: NaN and infinity",
}


@pytest.mark.parametrize("name", list(NAMED_AT))
async def test_a_value_no_request_can_carry_is_refused_naming_its_json_pointer(
    gate: Gate, surfaces: Surfaces, url: str, name: str
) -> None:
    answer = await post(url, surfaces.token_of(gate.agent(2)), BAD_BODIES[name])
    said = [m.get("error", {}).get("message", "") or result_text(m) for m in messages(answer)]
    assert any(NAMED_AT[name] in text for text in said), (answer.status_code, said)


async def test_a_10_mb_header_is_refused_and_the_surface_keeps_serving(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    token = surfaces.token_of(gate.agent())
    try:
        answer = await post(url, token, b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', {"X-Big": "h" * 10_000_000})
        assert answer.status_code in (400, 413, 431)
    except httpx2.HTTPError:
        pass  # the server closed the connection: a refusal too
    await still_serves(url, token)


async def _open(port: int, first: bytes) -> asyncio.StreamWriter:
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    await writer.drain()
    return writer


async def test_two_thousand_idle_and_slow_connections_do_not_stop_a_read(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    port, token = int(url.split(":")[2].split("/")[0]), surfaces.token_of(gate.agent())
    partial = (
        f"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        'Accept: application/json, text/event-stream\r\nContent-Length: 5000\r\n\r\n{"jsonrpc"'
    ).encode()
    writers = []
    try:
        for index in range(2000):
            writers.append(await _open(port, partial if index % 2 else b"POST /mcp HTTP/1.1\r\nHost:"))
        await still_serves(url, token)
    finally:
        for writer in writers:
            writer.close()


# ---------------------------------------------------------------- stdio


def _stdio_env(surfaces: Surfaces) -> dict[str, str]:
    env = surfaces.env(0)
    env.pop("EFFECTGATE_SURFACE_TOKENS_FILE")
    return env


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 99,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _stdio_session(
    surfaces: Surfaces, principal: str, lines: list[bytes]
) -> tuple[list[dict[str, Any]], str, int | None]:
    """Send ``lines`` to a stdio surface, read its answers until id 100 is answered (or 40 s), then end it."""
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "serve", "--stdio", "--principal", principal]
    process = subprocess.Popen(
        command, env=_stdio_env(surfaces), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(line + b"\n" for line in lines))
    process.stdin.flush()
    answers = _read_until(process, 100, 40.0)
    code = process.poll()
    try:
        _, err = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return answers, err.decode(errors="replace"), code


def _read_until(process: subprocess.Popen[bytes], last_id: int, timeout_s: float) -> list[dict[str, Any]]:
    import select

    assert process.stdout is not None
    answers: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not any(a.get("id") == last_id for a in answers):
        ready, _, _ = select.select([process.stdout], [], [], 0.5)
        if ready:
            line = process.stdout.readline()
            if not line:
                break
            answers.append(json.loads(line)) if line.strip().startswith(b"{") else None
    return answers


def test_stdio_garbage_lines_are_answered_or_refused_and_the_session_goes_on(gate: Gate, surfaces: Surfaces) -> None:
    garbage = [b"garbage", b"{", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 5, "method": "nope"}', b"[]"]
    listed = {"jsonrpc": "2.0", "id": 100, "method": "tools/list", "params": {}}
    lines = [
        *garbage,
        json.dumps(INITIALIZE).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        json.dumps(listed).encode(),
    ]
    answers, err, _ = _stdio_session(surfaces, gate.agent(), lines)
    by_id = {a.get("id"): a for a in answers}
    assert "result" in by_id.get(99, {}) and "result" in by_id.get(100, {}), (answers, err[-2000:])
    refused = [a for a in answers if "error" in a]
    assert any(a.get("id") == 5 for a in refused), answers
    assert len(refused) + err.count("\n") >= len(garbage), (answers, err[-2000:])


def test_stdio_a_principal_without_credentials_is_refused_by_name(surfaces: Surfaces) -> None:
    listed = {"jsonrpc": "2.0", "id": 100, "method": "tools/list", "params": {}}
    lines = [
        json.dumps(INITIALIZE).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        json.dumps(listed).encode(),
    ]
    answers, err, code = _stdio_session(surfaces, "ghost-principal", lines)
    said = json.dumps(answers) + err
    assert "ghost-principal" in said and "credentials" in said, (answers, err[-1500:], code)
    assert not any("result" in a and a.get("id") == 100 for a in answers)


# ---------------------------------------------------------------- settings


def _serve(surfaces: Surfaces, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "serve", *args]
    environment = {**_stdio_env(surfaces), **env}
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "localhost.evil.example"])
def test_an_open_principal_on_a_non_loopback_host_is_refused(surfaces: Surfaces, gate: Gate, host: str) -> None:
    done = _serve(surfaces, ["--open-principal", gate.agent(), "--host", host, "--port", str(free_port())])
    assert done.returncode != 0 and "loopback" in done.stdout + done.stderr, done


TOKEN_FILES = {
    "duplicate-digest": '[tokens.a]\nprincipal = "a1-50"\nsha256 = "{d}"\n'
    '[tokens.b]\nprincipal = "a1-51"\nsha256 = "{d}"\n',
    "bad-principal": '[tokens.a]\nprincipal = "a1.50"\nsha256 = "{d}"\n',
    "wildcard-principal": '[tokens.a]\nprincipal = "*"\nsha256 = "{d}"\n',
    "short-digest": '[tokens.a]\nprincipal = "a1-50"\nsha256 = "abc"\n',
    "unknown-key": '[tokens.a]\nprincipal = "a1-50"\nsha256 = "{d}"\nadmin = true\n',
    "not-toml": "[tokens.a\n",
    "top-level": 'principal = "a1-50"\n',
}


@pytest.mark.parametrize("name", list(TOKEN_FILES))
def test_a_bad_token_file_is_refused_at_start_naming_the_problem(surfaces: Surfaces, tmp_path: Path, name: str) -> None:
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKEN_FILES[name].replace("{d}", token_digest("t" * 20)))
    port = free_port()
    env = {**surfaces.env(port), "EFFECTGATE_SURFACE_TOKENS_FILE": str(tokens)}
    done = subprocess.run(
        [sys.executable, "-m", "effectgate.surface"], env=env, capture_output=True, text=True, timeout=60
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0 and (str(tokens) in said or "[tokens.a]" in said), done


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


async def test_a_revoked_token_is_refused_right_after_the_edit(
    surfaces: Surfaces, stack: Stack, gate: Gate, tmp_path: Path
) -> None:
    keep, revoke = "tok-keep-" + os.urandom(8).hex(), "tok-revoke-" + os.urandom(8).hex()
    both = _tokens({"keep": (gate.agent(), keep), "gone": (gate.agent(), revoke)})
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(both)
    port = surfaces.reserve()
    url = _start_with(surfaces, tokens, port)
    assert (await post(url, revoke, PING)).status_code == 200
    tokens.write_text(_tokens({"keep": (gate.agent(), keep)}))
    assert (await post(url, revoke, PING)).status_code == 401
    assert (await post(url, keep, PING)).status_code == 200


async def test_a_token_rotated_in_place_keeping_size_and_mtime_is_refused(
    surfaces: Surfaces, gate: Gate, tmp_path: Path
) -> None:
    """A same-size rewrite that keeps the file's mtime (``cp -p``, ``rsync -a``, a write in the same clock tick)."""
    principal, old, new = gate.agent(), "tok-old-" + os.urandom(8).hex(), "tok-new-" + os.urandom(8).hex()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_tokens({"rot": (principal, old)}))
    url = _start_with(surfaces, tokens, surfaces.reserve())
    assert (await post(url, old, PING)).status_code == 200
    before = tokens.stat()
    tokens.write_text(_tokens({"rot": (principal, new)}))
    os.utime(tokens, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (await post(url, old, PING)).status_code == 401


def _tokens(entries: dict[str, tuple[str, str]]) -> str:
    return "".join(
        f'[tokens.{label}]\nprincipal = "{principal}"\nsha256 = "{token_digest(token)}"\n'
        for label, (principal, token) in entries.items()
    )


def _start_with(surfaces: Surfaces, tokens: Path, port: int) -> str:
    return surfaces.start_on(port, EFFECTGATE_SURFACE_TOKENS_FILE=str(tokens))


# ---------------------------------------------------------------- results


async def test_a_secret_in_a_tool_result_is_scrubbed_through_the_surface_whole_and_cut(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    small, big = f"{new_id('s')}.txt", f"{new_id('S')}.txt"
    leak = f"dsn postgres://app:{DSN_PASSWORD}@db.internal/orders token {GITHUB}\n"
    (e2e_paths.sandbox / small).write_text(leak)
    (e2e_paths.sandbox / big).write_text("padding line\n" * 300 + leak)
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        whole = await client.call_tool("file_system__read", {"path": small})
        cut = await client.call_tool("file_system__read", {"path": big})
        request_id = (cut.meta or {})["io.effectgate/receipt"]["request_id"]
        rest = [
            await client.call_tool("effectgate_result", {"request_id": request_id, "offset_bytes": offset})
            for offset in range(0, 8 * LIMIT, LIMIT)
        ]
    seen = text_of(whole) + json.dumps(whole.structured_content) + text_of(cut) + "".join(map(text_of, rest))
    assert DSN_PASSWORD not in seen and GITHUB not in seen
    assert "[redacted:" in text_of(whole)


async def _result_size(client: Any, name: str) -> int:
    result = await client.call_tool("file_system__read", {"path": name})
    return len(json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")).encode())


async def test_a_result_exactly_at_the_limit_is_whole_and_one_byte_over_is_cut(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    probe, exact, over = (f"{new_id(p)}.txt" for p in ("p", "e", "o"))
    (e2e_paths.sandbox / probe).write_text("a" * 1500)
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        overhead = await _result_size(client, probe) - 1500
        (e2e_paths.sandbox / exact).write_text("a" * (LIMIT - overhead))
        (e2e_paths.sandbox / over).write_text("a" * (LIMIT - overhead + 1))
        at = await client.call_tool("file_system__read", {"path": exact})
        above = await client.call_tool("file_system__read", {"path": over})
    assert at.is_error is False and at.structured_content is not None, text_of(at)
    assert above.is_error is True and "[effectgate: result cut at" in text_of(above)


async def test_a_cut_result_of_multibyte_text_reads_back_whole(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    name, body = f"{new_id('u')}.txt", "é€😀" * 700
    (e2e_paths.sandbox / name).write_text(body)
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        cut = await client.call_tool("file_system__read", {"path": name})
        request_id = (cut.meta or {})["io.effectgate/receipt"]["request_id"]
        whole = await read_whole(client, request_id)
    assert json.loads(whole)["content"] == body


HOSTILE_RESULT_ARGS = [
    {"request_id": "{own}", "offset_bytes": -1},
    {"request_id": "{own}", "offset_bytes": -100000},
    {"request_id": "{own}", "offset_bytes": "abc"},
    {"request_id": "{own}", "offset_bytes": 1.5},
    {"request_id": "{own}", "offset_bytes": [1]},
    {"request_id": "{own}", "offset_bytes": None},
    {"request_id": "{own}", "offset_bytes": 10**30},
    {"request_id": "*"},
    {"request_id": ">"},
    {"request_id": "a.b"},
    {"request_id": ""},
    {"request_id": 12345},
    {"request_id": "{own}", "extra": 1},
    {},
]

RESULT_ARG_IDS = [
    "offset-minus-1",
    "offset-minus-100000",
    "offset-abc",
    "offset-1.5",
    "offset-list",
    "offset-null",
    "offset-1e30",
    "id-star",
    "id-gt",
    "id-dotted",
    "id-empty",
    "id-int",
    "extra-property",
    "no-arguments",
]


@pytest.mark.parametrize("arguments", HOSTILE_RESULT_ARGS, ids=RESULT_ARG_IDS)
async def test_effectgate_result_with_hostile_arguments_is_refused_by_name(
    gate: Gate, surfaces: Surfaces, url: str, arguments: dict[str, Any]
) -> None:
    token = surfaces.token_of(gate.agent(2))
    own = await raw_call(url, token, "file_system__read", {"path": "hello.txt"})
    request_id = own["result"]["_meta"]["io.effectgate/receipt"]["request_id"]
    filled = {k: request_id if v == "{own}" else v for k, v in arguments.items()}
    answer = await raw_call(url, token, "effectgate_result", filled, rpc_id=2)
    refused = "error" in answer or answer["result"].get("isError") is True
    said = answer.get("error", {}).get("message", "") + result_text(answer)
    assert refused and said.strip(), answer
    assert "Internal" not in said and "Traceback" not in said, said
    await still_serves(url, token)


async def test_a_request_id_longer_than_a_nats_control_line_leaves_the_principal_served(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    """Observed: the principal's NATS connection is closed by the server and stays closed on this replica."""
    token = surfaces.token_of(gate.agent())
    await still_serves(url, token)
    answer = await raw_call(url, token, "effectgate_result", {"request_id": "x" * 5000}, rpc_id=2)
    assert "error" in answer or answer["result"]["isError"] is True
    again = await raw_call(url, token, "file_system__read", {"path": "hello.txt"}, rpc_id=3)
    assert "result" in again and again["result"]["isError"] is False, again
