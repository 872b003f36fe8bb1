"""The MCP surface under a second attack, on a secured stack: each test asserts the safe behaviour.

The fixes of the first attack (a client key reused across tools, arguments, principals and
replicas; ``effectgate_result`` offsets; closed NATS connections; stdio garbage; ids JSON-RPC does
not allow; token rotation and revocation; a stdio principal without credentials), and the
parts not attacked before: the legacy GET stream of changes, the body check, the cancellation
relay, OAuth tokens and the keep-waiting question over stdio.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.catalog import Subjects

from .support import Gate, Paths
from .surface_support import Surfaces, texts
from .test_mcp_surface_attacks import (
    INITIALIZE,
    ROOT,
    _start_with,
    _stdio_env,
    _stdio_session,
    _tokens,
    messages,
    pending_of,
    post,
    raw_call,
    result_text,
    still_serves,
)

pytestmark = pytest.mark.e2e

LIMIT = 2048
BODY_LIMIT = 1_048_576
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
KEY = "io.effectgate/idempotency-key"


@pytest.fixture(scope="module")
def surfaces(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Surfaces]:
    started = Surfaces(stack, tmp_path_factory.mktemp("attacks2"))
    yield started
    started.stop_all()


@pytest.fixture(scope="module")
def url(surfaces: Surfaces) -> str:
    return surfaces.start(EFFECTGATE_SURFACE_HOLD_S="3", EFFECTGATE_SURFACE_RESULT_LIMIT_BYTES=str(LIMIT))


@pytest.fixture(scope="module")
def replicas(surfaces: Surfaces) -> list[str]:
    return [surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2") for _ in range(2)]


def refused(message: dict[str, Any]) -> bool:
    return "error" in message or message.get("result", {}).get("isError") is True


# ---------------------------------------------------------------- the client key


async def test_one_client_key_sent_at_once_with_other_arguments_on_two_replicas_is_one_request(
    gate: Gate, surfaces: Surfaces, replicas: list[str], new_id: Any
) -> None:
    principal, meta = gate.agent(), {KEY: new_id("k")}
    token = surfaces.token_of(principal)
    answers = await asyncio.gather(
        *(
            raw_call(r, token, "file_system__write", {"path": f"{new_id('r')}.txt", "content": "x"}, _meta=meta)
            for r in replicas
        )
    )
    assert sum("idempotency_key_reused" in result_text(a) for a in answers) == 1, answers
    assert await gate.count(Subjects.request(principal)) == 1
    held = next(a for a in answers if "io.effectgate/pending" in a["result"].get("_meta", {}))
    await gate.decide("bob", held["result"]["_meta"]["io.effectgate/pending"]["approval_id"], approve=False)


async def test_one_client_key_of_two_principals_is_two_calls(gate: Gate, surfaces: Surfaces, url: str) -> None:
    first, second, meta = gate.agent(), gate.agent(), {KEY: "shared-key-0001"}
    a = await raw_call(url, surfaces.token_of(first), "file_system__read", {"path": "hello.txt"}, _meta=meta)
    b = await raw_call(url, surfaces.token_of(second), "file_system__read", {"path": "hello.txt"}, _meta=meta)
    assert a["result"]["isError"] is False and b["result"]["isError"] is False, (a, b)
    ids = {m["result"]["_meta"]["io.effectgate/receipt"]["request_id"] for m in (a, b)}
    assert len(ids) == 2
    assert await gate.count(Subjects.request(second)) == 1


# ---------------------------------------------------------------- effectgate_result


async def _cut_request(url: str, token: str, e2e_paths: Paths, name: str, body: str) -> tuple[str, int]:
    """Read ``body`` through a file so its result is cut; its request id and the whole result's size in bytes."""
    (e2e_paths.sandbox / name).write_text(body)
    cut = await raw_call(url, token, "file_system__read", {"path": name})
    marker = result_text(cut).rpartition("[effectgate: result cut at ")[2]
    assert marker, cut
    size = int(marker.split(" of ")[1].split(" bytes")[0])
    return str(cut["result"]["_meta"]["io.effectgate/receipt"]["request_id"]), size


async def test_effectgate_result_followed_by_its_own_offsets_reads_multibyte_text_whole(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    token, body = surfaces.token_of(gate.agent()), "a€😀é" * 900
    request_id, _ = await _cut_request(url, token, e2e_paths, f"{new_id('m')}.txt", body)
    parts, offset = [], 0
    for rpc_id in range(2, 40):
        part = result_text(
            await raw_call(
                url, token, "effectgate_result", {"request_id": request_id, "offset_bytes": offset}, rpc_id=rpc_id
            )
        )
        data, _, note = part.partition("\n[effectgate: ")
        parts.append(data)
        if not note:
            break
        offset = int(note.split("from offset ")[1].rstrip("]"))
    assert json.loads("".join(parts))["content"] == body


async def test_effectgate_result_at_hostile_offsets_is_refused_or_whole_characters(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    token, body = surfaces.token_of(gate.agent()), "😀" * 1500
    request_id, size = await _cut_request(url, token, e2e_paths, f"{new_id('h')}.txt", body)
    for offset in (1, 13, 14, 15, size - 3):  # inside a four-byte character
        answer = await raw_call(url, token, "effectgate_result", {"request_id": request_id, "offset_bytes": offset})
        assert not refused(answer) and "\ufffd" not in result_text(answer), (offset, answer)
    hostile: list[Any] = [size, size + 1, 2**63, 2**64 + 1, -(2**63), 0.0, 3.0, True, False, "0", 1e300]
    for value in hostile:
        answer = await raw_call(url, token, "effectgate_result", {"request_id": request_id, "offset_bytes": value})
        assert refused(answer) and "Internal" not in result_text(answer), (value, answer)
    await still_serves(url, token)


# ---------------------------------------------------------------- the principal's NATS connection


async def test_a_call_larger_than_a_nats_message_is_refused_and_the_principal_stays_served(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    token = surfaces.token_of(gate.agent())
    await still_serves(url, token)
    arguments = {"path": "big.txt", "content": "x" * (BODY_LIMIT - 4000)}
    answer = await raw_call(url, token, "file_system__write", arguments, rpc_id=2)
    assert refused(answer), answer
    again = await raw_call(url, token, "file_system__read", {"path": "hello.txt"}, rpc_id=3)
    assert "result" in again and again["result"]["isError"] is False, again


# ---------------------------------------------------------------- stdio

STDIO_GARBAGE = [
    b"garbage",
    b"{",
    b"\xff\xfe",
    b"[]",
    b"{}",
    b"null",
    b"42",
    b'"text"',
    b'{"jsonrpc": "2.0"}',
    b"x" * 200_000,
]
STDIO_BAD_IDS = [
    b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": null, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 2.0, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}',
]
STDIO_OPENING = [json.dumps(INITIALIZE).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
STDIO_LIST = json.dumps({"jsonrpc": "2.0", "id": 100, "method": "tools/list", "params": {}}).encode()


def test_stdio_each_garbage_line_gets_a_parse_error_with_id_null_and_the_session_goes_on(
    gate: Gate, surfaces: Surfaces
) -> None:
    answers, _, _ = _stdio_session(surfaces, gate.agent(), [*STDIO_OPENING, *STDIO_GARBAGE, STDIO_LIST])
    errors = [a for a in answers if "error" in a]
    said = [(a.get("id"), a["error"]["code"], a["error"]["message"][:90]) for a in errors]
    assert len(errors) == len(STDIO_GARBAGE), said
    assert all(a["id"] is None and a["error"]["code"] in (-32700, -32600) for a in errors), errors
    assert any("result" in a and a.get("id") == 100 for a in answers), answers


def test_stdio_a_request_whose_id_json_rpc_does_not_allow_is_answered_with_an_error(
    gate: Gate, surfaces: Surfaces
) -> None:
    """Observed: such a line is read as a notification (the id dropped) and gets no answer at all."""
    answers, _, _ = _stdio_session(surfaces, gate.agent(), [*STDIO_OPENING, *STDIO_BAD_IDS, STDIO_LIST])
    errors = [a for a in answers if "error" in a]
    assert len(errors) == len(STDIO_BAD_IDS), answers
    assert all(a["id"] is None and a["error"]["code"] in (-32700, -32600) for a in errors), errors
    assert any("result" in a and a.get("id") == 100 for a in answers), answers


def test_stdio_a_line_the_sdk_cannot_parse_is_answered_naming_the_json_pointer(gate: Gate, surfaces: Surfaces) -> None:
    head = b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "file_system__read", "arguments": '
    lines = [head + b'{"path": "a\\ud800.txt"}}}', head + b'{"x": ' + b"[" * 3000 + b"]" * 3000 + b"}}}"]
    answers, _, _ = _stdio_session(surfaces, gate.agent(), [*STDIO_OPENING, *lines, STDIO_LIST])
    said = [a["error"]["message"] for a in answers if "error" in a]
    assert any("value at /params/arguments/path: string is not valid Unicode" in m for m in said), said
    assert any("value at /params/arguments/x/0/0" in m and "nested deeper" in m for m in said), said
    assert any("result" in a and a.get("id") == 100 for a in answers), answers


def test_stdio_a_principal_without_credentials_exits_2_naming_the_credentials_file(surfaces: Surfaces) -> None:
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "serve", "--stdio", "--principal", "nobody"]
    process = subprocess.Popen(
        command, env=_stdio_env(surfaces), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = process.communicate(timeout=60)  # stdin stays open until it exits by itself
    expected = surfaces.stack.state_dir / "credentials" / "agent-nobody.json"
    assert process.returncode == 2 and str(expected) in err.decode(), (process.returncode, err[-1500:])


# ---------------------------------------------------------------- the body check

_PADDING = '"pad": ' + "9" * 5000


BAD_IDS = {
    "object": b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}',
    "array": b'{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}',
    "true": b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
    "null": b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}',
    "fraction": b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}',
    "integral-float": b'{"jsonrpc": "2.0", "id": -0.0, "method": "tools/list"}',
    "nan": b'{"jsonrpc": "2.0", "id": NaN, "method": "tools/list"}',
    "object-with-a-5000-digit-number": (
        '{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list", "params": {' + _PADDING + "}}"
    ).encode(),
    "object-with-nan": b'{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list", "params": {"n": NaN}}',
    "duplicate-id-object-last": b'{"jsonrpc": "2.0", "id": 1, "id": {"x": 1}, "method": "tools/list"}',
    "duplicate-id-object-first": b'{"jsonrpc": "2.0", "id": {"x": 1}, "id": 1, "method": "tools/list"}',
    "utf16": '{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}'.encode("utf-16"),
}


@pytest.mark.parametrize("name", list(BAD_IDS))
async def test_a_request_with_an_id_json_rpc_does_not_allow_is_never_a_silent_202(
    gate: Gate, surfaces: Surfaces, url: str, name: str
) -> None:
    answer = await post(url, surfaces.token_of(gate.agent()), BAD_IDS[name])
    assert answer.status_code != 202 and answer.text.strip(), (answer.status_code, answer.text[:300])
    assert answer.status_code < 500, answer.text[:300]
    if answer.status_code == 200:  # answered: duplicate keys are read last-wins, as the body check reads them
        assert all(isinstance(m.get("id"), str | int) or "error" in m for m in messages(answer)), answer.text[:300]


def _ping_of(size: int) -> bytes:
    body = PING[:-1] + b" " * (size - len(PING)) + b"}"
    assert len(body) == size
    return body


async def _chunks(body: bytes, size: int) -> Any:
    for start in range(0, len(body), size):
        yield body[start : start + size]


async def test_bodies_at_the_limit_pass_over_it_are_413_plain_or_chunked(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    token = surfaces.token_of(gate.agent())
    assert (await post(url, token, _ping_of(BODY_LIMIT))).status_code == 200
    assert (await post(url, token, _ping_of(BODY_LIMIT + 1))).status_code == 413
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        over = await http.post(url, content=_chunks(_ping_of(BODY_LIMIT + 1), 65_536), headers=headers)
        under = await http.post(url, content=_chunks(_ping_of(BODY_LIMIT), 7), headers=headers)
        bad = await http.post(url, content=_chunks(BAD_IDS["object"], 3), headers=headers)
    assert (over.status_code, under.status_code, bad.status_code) == (413, 200, 400), (over, under, bad.text)
    assert bad.json()["error"]["code"] == -32600
    await still_serves(url, token)


async def test_a_30_mb_body_and_non_json_bodies_are_refused_and_the_surface_keeps_serving(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    token = surfaces.token_of(gate.agent())
    with contextlib.suppress(httpx2.HTTPError):  # the server closed the connection: a refusal too
        assert (await post(url, token, b"[" * 30_000_000)).status_code == 413
    for body in (b"not json", b"\x00\x01\x02", b"", b"\xef\xbb\xbf" + PING):
        answer = await post(url, token, body)
        assert 400 <= answer.status_code < 500 or all("error" in m for m in messages(answer)), (body, answer.text)
    await still_serves(url, token)


# ---------------------------------------------------------------- token files


async def test_a_token_rotated_with_cp_p_is_refused_and_revoke_refuses_at_once(
    surfaces: Surfaces, gate: Gate, tmp_path: Path
) -> None:
    principal, old, new = gate.agent(), "tok-old-" + os.urandom(8).hex(), "tok-new-" + os.urandom(8).hex()
    tokens, staged = tmp_path / "tokens.toml", tmp_path / "staged.toml"
    other = (gate.agent(), "tok-oth-" + os.urandom(8).hex())
    tokens.write_text(_tokens({"rot": (principal, old), "other": other}))
    staged.write_text(_tokens({"rot": (principal, new), "other": other}))
    os.utime(staged, ns=(tokens.stat().st_atime_ns, tokens.stat().st_mtime_ns))
    url = _start_with(surfaces, tokens, surfaces.reserve())
    assert (await post(url, old, PING)).status_code == 200
    subprocess.run(["cp", "-p", str(staged), str(tokens)], check=True)  # noqa: ASYNC221
    assert (await post(url, old, PING)).status_code == 401
    assert (await post(url, new, PING)).status_code == 200
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "token", "revoke", "--label", "rot", "--file", str(tokens)]
    assert subprocess.run(command, capture_output=True, timeout=60).returncode == 0  # noqa: ASYNC221
    assert (await post(url, new, PING)).status_code == 401


# ---------------------------------------------------------------- the GET stream of changes


def _get(port: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"GET /mcp HTTP/1.1\r\nHost: x\r\n{auth}Accept: text/event-stream\r\n\r\n").encode()


async def _stream_status(port: int, token: str | None) -> tuple[int, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get(port, token))
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 30)
    return int(line.split()[1]), writer


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])


async def test_a_get_stream_without_a_valid_token_is_401(surfaces: Surfaces, url: str) -> None:
    for token in (None, "tok-made-up-0000", ""):
        status, writer = await _stream_status(_port(url), token)
        writer.close()
        assert status == 401, token


async def test_many_get_streams_of_one_principal_are_bounded_and_never_reading_ones_stop_nothing(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    """Observed: every stream is accepted (no bound per principal); the surface keeps serving meanwhile."""
    token, writers, statuses = surfaces.token_of(gate.agent()), [], []
    try:
        for _ in range(300):
            status, writer = await _stream_status(_port(url), token)
            statuses.append(status)
            writers.append(writer)
        for writer in writers:  # never read again
            writer.transport.set_write_buffer_limits(0)
        await still_serves(url, surfaces.token_of(gate.agent()))
    finally:
        for writer in writers:
            writer.close()
    assert statuses.count(200) < 300, "300 open change streams of one principal were all accepted"


async def test_a_get_stream_ends_when_its_token_is_revoked(gate: Gate, surfaces: Surfaces, tmp_path: Path) -> None:
    """Observed: the stream opened before the revocation stays open and carries the next list_changed."""
    principal, token = gate.agent(), "tok-stream-" + os.urandom(8).hex()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(_tokens({"s": (principal, token)}))
    port = surfaces.reserve()
    url = _start_with(surfaces, tokens, port)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get(port, token))
    await writer.drain()
    assert b" 200 " in await asyncio.wait_for(reader.readline(), 30)
    await raw_call(url, token, "file_system__read", {"path": "hello.txt"})  # the principal is connected
    tokens.write_text("")
    assert (await post(url, token, PING)).status_code == 401
    descriptor = {
        **json.loads((ROOT / "deploy/tools/file_system.json").read_text()),
        "name": f"fsrev{os.urandom(3).hex()}",
    }
    assert (await gate.publish_tool(descriptor))["ok"]
    try:
        seen = await _until_end_or_event(reader)
    finally:
        writer.close()
    assert seen.endswith(b"(closed)"), seen


async def _until_end_or_event(reader: asyncio.StreamReader) -> bytes:
    """What the stream says until it closes, carries an event or a keep-alive (15 s), or 20 s pass."""
    seen = b""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(20):
            while chunk := await reader.read(65_536):
                seen += chunk
                if b"list_changed" in seen or b"keep-alive" in seen:
                    return seen
            return seen + b"(closed)"
    return seen + b"(no word in 20 s)"


# ---------------------------------------------------------------- the cancellation relay


async def test_another_client_of_the_same_principal_cannot_cancel_a_call_by_its_json_rpc_id(
    gate: Gate, surfaces: Surfaces, new_id: Any
) -> None:
    principal = gate.agent()
    held, token = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="6"), surfaces.token_of(principal)
    arguments = {"path": f"{new_id('c')}.txt", "content": "keep\n"}
    session = {"Mcp-Session-Id": "owner-client-0123456789"}
    call = asyncio.create_task(raw_call(held, token, "file_system__write", arguments, rpc_id=7, headers=session))
    item = await pending_of(gate, principal)
    cancel = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}).encode()
    await post(held, token, cancel, {"Mcp-Session-Id": "other-client-0123456789"})
    await post(held, token, cancel)  # a legacy client without a client id
    await post(held, token, cancel, {"MCP-Protocol-Version": "2026-07-28"})  # a 2026-07-28 client
    outcome = await call
    assert "pending approval" in result_text(outcome), outcome
    assert await gate.is_pending(item["request_id"])
    await gate.decide("bob", item["approval_id"], approve=False)


# ---------------------------------------------------------------- OAuth

ISSUER = "https://login.example"


@pytest.fixture(scope="module")
def oauth(surfaces: Surfaces, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path_factory.mktemp("oauth2") / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "ES256"}]}))
    port = surfaces.reserve()
    settings = {
        "EFFECTGATE_SURFACE_OAUTH_JWKS": str(jwks),
        "EFFECTGATE_SURFACE_OAUTH_ISSUER": ISSUER,
        "EFFECTGATE_SURFACE_RESOURCE_URL": f"http://127.0.0.1:{port}/mcp",
        "EFFECTGATE_SURFACE_TOKENS_FILE": "",
    }
    return surfaces.start_on(port, **settings), key


def _claims(url: str, **claims: Any) -> dict[str, Any]:
    body = {"iss": ISSUER, "aud": url, "sub": "a1-58", "exp": time.time() + 300, "scope": "effectgate:tools"}
    return {key: value for key, value in {**body, **claims}.items() if value is not None}


def _forged(url: str, key: Any, name: str) -> str:
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    if name == "hs256-with-the-public-key":

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
        payload = b64(json.dumps(_claims(url)).encode())
        signature = hmac.new(pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
        return f"{head}.{payload}.{b64(signature)}"
    if name == "alg-none":
        return jwt.encode(_claims(url), "", algorithm="none", headers={"kid": "k1"})
    if name == "another-key":
        return jwt.encode(
            _claims(url), ec.generate_private_key(ec.SECP256R1()), algorithm="ES256", headers={"kid": "k1"}
        )
    misfits: dict[str, dict[str, Any]] = {
        "wrong-audience": {"aud": "http://127.0.0.1:1/mcp"},
        "wrong-issuer": {"iss": "https://evil.example"},
        "issuer-with-slash": {"iss": ISSUER + "/"},
        "missing-exp": {"exp": None},
        "missing-aud": {"aud": None},
        "not-yet-valid": {"nbf": time.time() + 3600},
        "no-scope": {"scope": None},
        "other-scope": {"scope": "effectgate:toolsx profile"},
        "scope-a-number": {"scope": 7},
        "sub-wildcard": {"sub": "a1-58.>"},
        "sub-a-number": {"sub": 58},
    }
    return jwt.encode(_claims(url, **misfits[name]), key, algorithm="ES256", headers={"kid": "k1"})


FORGED = [
    "hs256-with-the-public-key",
    "alg-none",
    "another-key",
    "wrong-audience",
    "wrong-issuer",
    "issuer-with-slash",
    "missing-exp",
    "missing-aud",
    "not-yet-valid",
    "no-scope",
    "other-scope",
    "scope-a-number",
    "sub-wildcard",
    "sub-a-number",
]


@pytest.mark.parametrize("name", FORGED)
async def test_oauth_a_forged_or_misfit_token_is_refused_401_or_403(oauth: tuple[str, Any], name: str) -> None:
    """Observed: a validly signed token whose ``scope`` is a number is a 500 (``_access`` iterates it)."""
    url, key = oauth
    answer = await post(url, _forged(url, key, name), PING)
    assert answer.status_code in (401, 403), (answer.status_code, answer.text[:300])
    assert (
        await post(url, jwt.encode(_claims(url), key, algorithm="ES256", headers={"kid": "k1"}), PING)
    ).status_code == 200


# ---------------------------------------------------------------- the keep-waiting question over stdio


def _stdio(surfaces: Surfaces, principal: str) -> StdioServerParameters:
    env = {**_stdio_env(surfaces), "EFFECTGATE_SURFACE_HOLD_S": "4", "EFFECTGATE_SURFACE_PROGRESS_S": "1"}
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "serve", "--stdio", "--principal", principal]
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


ANSWERS = ["garbage-content", "accept-without-content", "a-string-no", "error", "forever"]


async def _answer(kind: str) -> ElicitResult:
    if kind == "forever":
        await asyncio.sleep(3600)
    if kind == "error":
        raise RuntimeError("the client cannot show forms")
    content: Any = {
        "garbage-content": {"keep_waiting": {"approve": True}, "approved": True},
        "a-string-no": {"keep_waiting": "no"},
    }.get(kind)
    return ElicitResult(action="accept", content=content)


@pytest.mark.parametrize("kind", ANSWERS)
async def test_the_keep_waiting_question_answered_badly_ends_the_call_and_approves_nothing(
    gate: Gate, surfaces: Surfaces, e2e_paths: Paths, new_id: Any, kind: str
) -> None:
    """Observed: a client that never answers the question holds the call past ``hold_s`` for good."""
    principal, name = gate.agent(), f"{new_id('q')}.txt"

    async def elicit(context: Any, params: Any) -> ElicitResult:
        return await _answer(kind)

    ended: Any = "the call did not end within 30 s"
    async with Client(_stdio(surfaces, principal), mode="legacy", elicitation_callback=elicit) as client:
        with contextlib.suppress(TimeoutError):
            try:
                ended = await asyncio.wait_for(
                    client.call_tool("file_system__write", {"path": name, "content": "x"}), 30
                )
            except MCPError as error:
                ended = error
    assert not isinstance(ended, str), ended
    assert getattr(ended, "is_error", True) is True, ended
    assert not (e2e_paths.sandbox / name).exists()
    approvals = [a for a in await gate.approvals() if a["principal"] == principal]
    assert all([await gate.is_pending(a["request_id"]) for a in approvals]), approvals


async def test_an_unanswered_keep_waiting_question_does_not_hide_a_call_approved_meanwhile(
    gate: Gate, surfaces: Surfaces, e2e_paths: Paths, new_id: Any
) -> None:
    """Observed: while the question was out the receipt went unwatched; the call said 'pending' at the hold's end."""
    principal, name, asked = gate.agent(), f"{new_id('u')}.txt", asyncio.Event()

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.set()
        return await _answer("forever")

    async def approve_when_asked() -> None:
        await asked.wait()  # approved while the question is out, never answered
        for _ in range(150):
            pending = [a for a in await gate.approvals() if a["principal"] == principal]
            if pending:
                assert (await gate.decide("alice", pending[0]["approval_id"]))["ok"]
                return
            await asyncio.sleep(0.2)
        raise AssertionError("no approval was opened")

    parameters = _stdio(surfaces, principal)
    parameters.env = {**(parameters.env or {}), "EFFECTGATE_SURFACE_HOLD_S": "60", "EFFECTGATE_SURFACE_PROGRESS_S": "1"}
    async with Client(parameters, mode="legacy", elicitation_callback=elicit) as client:
        approving = asyncio.create_task(approve_when_asked())
        result = await asyncio.wait_for(client.call_tool("file_system__write", {"path": name, "content": "x"}), 45)
        await approving
    assert result.is_error is False, texts(result)
    assert (e2e_paths.sandbox / name).read_text() == "x"
