"""The MCP surface on a real stack: who may call, what they see, how calls end, and the limits.

Every call goes through ``python -m effectgate.surface`` (HTTP, static token file) as the SDK's own
client, to a stack whose services run as processes on a secured NATS and a real Redis.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, ToolListChangedNotification

from effectgate.contracts.bus.catalog import Subjects

from .support import Gate, Paths
from .surface_support import Surfaces, http_client, read_whole

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ERAS = ("legacy", "2026-07-28")
LIMIT = 2048


@pytest.fixture(scope="module")
def url(surfaces: Surfaces) -> str:
    return surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2", EFFECTGATE_SURFACE_RESULT_LIMIT_BYTES=str(LIMIT))


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_principal_lists_what_the_policy_lets_it_call_named_for_mcp(
    gate: Gate, surfaces: Surfaces, url: str, mode: str
) -> None:
    principal = gate.agent()
    expected = await (await gate.client(principal)).list_tools()
    async with http_client(url, surfaces.token_of(principal), mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    pairs = {f"{d.name}__{op}" for d in expected for op in d.operations}
    assert set(tools) == pairs | {"effectgate_result"}
    read, write = tools["file_system__read"], tools["file_system__write"]
    assert read.input_schema["type"] == "object" and "$schema" not in read.input_schema
    assert read.annotations is not None and read.annotations.read_only_hint is True
    assert write.annotations is not None and write.annotations.read_only_hint is False
    assert read.output_schema is not None and "sha256" in read.output_schema["properties"]
    assert all(len(name) <= 64 for name in tools)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_read_runs_and_returns_content_and_structured_content(
    gate: Gate, surfaces: Surfaces, url: str, mode: str
) -> None:
    principal = gate.agent()
    async with http_client(url, surfaces.token_of(principal), mode) as client:
        result = await client.call_tool("file_system__read", {"path": "hello.txt"})
    assert result.is_error is False
    assert result.structured_content is not None
    assert result.structured_content["content"] == "hello from the sandbox\n"
    receipt = result.meta["io.effectgate/receipt"] if result.meta else {}
    assert receipt["outcome"] == "succeeded"
    assert (await gate.receipt(principal, receipt["request_id"])).outcome == "succeeded"


@pytest.mark.parametrize("arguments", [{"path": "../outside/secret.txt"}, {"path": "escape.txt"}, {"nope": 1}, {}])
async def test_a_refused_call_is_an_error_result_that_names_what_was_wrong(
    gate: Gate, surfaces: Surfaces, url: str, arguments: dict[str, Any]
) -> None:
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        result = await client.call_tool("file_system__read", arguments)
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith("effectgate: refused (") and "fix what the reason names" in text
    assert "outside secret" not in text


@pytest.mark.parametrize("mode", ERAS)
async def test_an_unknown_tool_is_a_json_rpc_error(gate: Gate, surfaces: Surfaces, url: str, mode: str) -> None:
    async with http_client(url, surfaces.token_of(gate.agent()), mode) as client:
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("file_system__format_disk", {})


async def test_a_write_is_pending_then_after_an_approval_the_same_call_returns_the_outcome_once(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    principal, name = gate.agent(), f"{new_id('w')}.txt"
    arguments = {"path": name, "content": "approved once\n"}
    async with http_client(url, surfaces.token_of(principal), "legacy") as client:
        pending = await client.call_tool("file_system__write", arguments)
        held = pending.meta["io.effectgate/pending"] if pending.meta else {}
        assert pending.is_error is True and "pending approval ap-" in text_of(pending)
        again = await client.call_tool("file_system__write", arguments)  # a re-send while pending: no new approval
        assert (again.meta or {})["io.effectgate/pending"] == held
        assert (await gate.decide("bob", held["approval_id"]))["ok"]
        outcome = await client.call_tool("file_system__write", arguments)
        replayed = await client.call_tool("file_system__write", arguments)  # a re-send after the outcome
    assert outcome.is_error is False, text_of(outcome)
    assert (e2e_paths.sandbox / name).read_text() == "approved once\n"
    assert (replayed.meta or {})["io.effectgate/receipt"]["request_id"] == held["request_id"]
    assert await gate.count(f"tg.receipt.{principal}.*") == 1
    assert await gate.count(Subjects.request(principal)) == 1


async def test_two_deliberate_calls_with_their_own_keys_are_two_calls_and_a_reused_key_is_refused(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    principal, arguments = gate.agent(), {"path": "hello.txt"}
    async with http_client(url, surfaces.token_of(principal), "legacy") as client:
        first = await client.call_tool("file_system__read", arguments, meta={"io.effectgate/idempotency-key": "k-1"})
        second = await client.call_tool("file_system__read", arguments, meta={"io.effectgate/idempotency-key": "k-2"})
        resent = await client.call_tool("file_system__read", arguments, meta={"io.effectgate/idempotency-key": "k-1"})
        other = await client.call_tool(
            "file_system__read", {"path": "notes/a.txt"}, meta={"io.effectgate/idempotency-key": "k-1"}
        )
    ids = [(r.meta or {})["io.effectgate/receipt"]["request_id"] for r in (first, second, resent)]
    assert ids[0] != ids[1] and ids[2] == ids[0]
    assert other.is_error is True and "idempotency_key_reused" in text_of(other)


async def test_a_result_over_the_limit_is_cut_with_a_marker_and_the_rest_is_readable(
    gate: Gate, surfaces: Surfaces, url: str, e2e_paths: Paths, new_id: Any
) -> None:
    name = f"{new_id('big')}.txt"
    body = "".join(f"line {index:05d}\n" for index in range(600))
    (e2e_paths.sandbox / name).write_text(body)
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        cut = await client.call_tool("file_system__read", {"path": name})
        marker = text_of(cut)
        assert cut.is_error is True  # the tool declares an output schema: a cut result cannot fit it
        assert "[effectgate: result cut at 2048 of" in marker and len(marker) < LIMIT + 400
        request_id = (cut.meta or {})["io.effectgate/receipt"]["request_id"]
        whole = await read_whole(client, request_id)
    assert json.loads(whole)["content"] == body


async def test_one_principal_reads_no_other_principals_result(gate: Gate, surfaces: Surfaces, url: str) -> None:
    owner, other = gate.agent(), gate.agent()
    async with http_client(url, surfaces.token_of(owner), "legacy") as client:
        read = await client.call_tool("file_system__read", {"path": "hello.txt"})
    request_id = (read.meta or {})["io.effectgate/receipt"]["request_id"]
    async with http_client(url, surfaces.token_of(other), "legacy") as client:
        stolen = await client.call_tool("effectgate_result", {"request_id": request_id})
    assert stolen.is_error is True and "hello from the sandbox" not in text_of(stolen)


async def _post(url: str, token: str | None, body: bytes) -> httpx2.Response:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, content=body, headers=headers)


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()


@pytest.mark.parametrize("token", [None, "not-a-token", "tok-forged"])
async def test_no_valid_token_is_401_with_the_bearer_challenge(url: str, token: str | None) -> None:
    answer = await _post(url, token, PING)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer ")


async def test_the_probes_answer_without_a_token_beside_the_mcp_path(url: str) -> None:
    base = url.rsplit("/", 1)[0]
    async with httpx2.AsyncClient(timeout=30) as http:
        live, ready = await http.get(f"{base}/livez"), await http.get(f"{base}/readyz")
    assert (live.status_code, live.json()) == (200, {"live": True})
    assert (ready.status_code, ready.json()) == (200, {"ready": True, "not_ready": {}})


async def test_a_token_without_the_scope_is_403(surfaces: Surfaces, url: str, gate: Gate) -> None:
    token = "tok-unscoped-" + gate.agent()
    from effectgate.surface.adapters.tokens import token_digest

    entry = f'\n[tokens.unscoped]\nprincipal = "a1-59"\nsha256 = "{token_digest(token)}"\nscopes = ["read:other"]\n'
    surfaces.tokens_file.write_text(surfaces.tokens_file.read_text() + entry)
    scoped_url = surfaces.start()  # the token file is read at start
    answer = await _post(scoped_url, token, PING)
    assert answer.status_code == 403 and "insufficient_scope" in answer.headers["www-authenticate"]


async def test_a_request_body_over_the_limit_is_refused_with_413(gate: Gate, surfaces: Surfaces, url: str) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "file_system__read"}}
    call["params"]["arguments"] = {"path": "x" * 2_000_000}
    answer = await _post(url, surfaces.token_of(gate.agent()), json.dumps(call).encode())
    assert answer.status_code == 413


async def test_malformed_json_rpc_is_refused_and_the_surface_keeps_serving(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    token = surfaces.token_of(gate.agent())
    for body in (b"{", b"[]", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 7}', b"\xff\xfe"):
        answer = await _post(url, token, body)
        assert 400 <= answer.status_code < 500 or b'"error"' in answer.content
    async with http_client(url, token, "legacy") as client:
        assert (await client.call_tool("file_system__read", {"path": "hello.txt"})).is_error is False


async def test_a_cancelled_pending_call_is_withdrawn(gate: Gate, surfaces: Surfaces, new_id: Any) -> None:
    principal = gate.agent()
    held_url = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="60")
    async with http_client(held_url, surfaces.token_of(principal), "legacy") as client:
        call = asyncio.create_task(
            client.call_tool("file_system__write", {"path": f"{new_id('c')}.txt", "content": "x"})
        )
        request_id = await _pending_request_of(gate, principal)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        receipt = await gate.receipt(principal, request_id)
    assert (receipt.outcome, receipt.reason_code) == ("denied", "withdrawn")
    assert not await gate.is_pending(request_id)


async def _pending_request_of(gate: Gate, principal: str, timeout_s: float = 10.0) -> str:

    for _ in range(int(timeout_s * 10)):
        listed = [item for item in await gate.approvals() if item["principal"] == principal]
        if listed:
            return str(listed[0]["request_id"])
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no pending approval of {principal}")


def test_the_token_file_keeps_digests_only(surfaces: Surfaces, gate: Gate) -> None:
    token = surfaces.token_of(gate.agent())
    assert token not in Path(surfaces.tokens_file).read_text()


def _stdio(surfaces: Surfaces, principal: str) -> StdioServerParameters:
    env = surfaces.env(0)
    env.pop("EFFECTGATE_SURFACE_TOKENS_FILE")
    command = [str(ROOT / ".venv/bin/effectgate"), "mcp", "serve", "--stdio", "--principal", principal]
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


async def test_a_desktop_client_over_stdio_is_its_principal_and_hears_list_changed(
    gate: Gate, surfaces: Surfaces, new_id: Any
) -> None:
    principal, heard = gate.agent(), asyncio.Event()
    tool = f"fsio{new_id('')[:8]}".lower()
    descriptor = {**json.loads((ROOT / "deploy/tools/file_system.json").read_text()), "name": tool}

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.set()

    async with Client(_stdio(surfaces, principal), mode="legacy", message_handler=on_message) as client:
        read = await client.call_tool("file_system__read", {"path": "hello.txt"})
        before = {t.name for t in (await client.list_tools()).tools}
        assert (await gate.publish_tool(descriptor))["ok"]
        await asyncio.wait_for(heard.wait(), 15)
        after = {t.name for t in (await client.list_tools()).tools}
    assert read.is_error is False
    assert (read.meta or {})["io.effectgate/receipt"]["request_id"] in {
        r.request_id for r in [await gate.receipt(principal, (read.meta or {})["io.effectgate/receipt"]["request_id"])]
    }
    assert f"{tool}__read" in after - before


@pytest.fixture(scope="module")
def oauth(surfaces: Surfaces, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path_factory.mktemp("oauth") / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "ES256"}]}))
    port = surfaces.reserve()
    resource = f"http://127.0.0.1:{port}/mcp"
    settings = {
        "EFFECTGATE_SURFACE_OAUTH_JWKS": str(jwks),
        "EFFECTGATE_SURFACE_OAUTH_ISSUER": ISSUER,
        "EFFECTGATE_SURFACE_RESOURCE_URL": resource,
        "EFFECTGATE_SURFACE_TOKENS_FILE": "",
    }
    return surfaces.start_on(port, **settings), key


ISSUER = "https://login.example"


def _access(key: Any, resource: str, **claims: Any) -> str:
    body = {"iss": ISSUER, "aud": resource, "sub": "a1-58", "exp": time.time() + 300, "scope": "effectgate:tools"}
    return jwt.encode({**body, **claims}, key, algorithm="ES256", headers={"kid": "k1"})


async def test_oauth_the_resource_metadata_names_the_issuer_and_a_401_points_to_it(oauth: tuple[str, Any]) -> None:
    url, _ = oauth
    origin = url.removesuffix("/mcp")
    async with httpx2.AsyncClient(timeout=10) as http:
        metadata = (await http.get(f"{origin}/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["resource"] == url and metadata["authorization_servers"] == [ISSUER]
    challenge = (await _post(url, None, PING)).headers["www-authenticate"]
    assert "resource_metadata=" in challenge and "/.well-known/oauth-protected-resource" in challenge


async def test_oauth_a_token_for_this_resource_acts_as_its_principal_others_are_refused(
    oauth: tuple[str, Any],
) -> None:
    url, key = oauth
    async with http_client(url, _access(key, url), "legacy") as client:
        result = await client.call_tool("file_system__read", {"path": "hello.txt"})
    assert result.is_error is False
    assert (await _post(url, _access(key, "https://other.example/mcp"), PING)).status_code == 401
    assert (await _post(url, _access(key, url, exp=time.time() - 600), PING)).status_code == 401
    assert (await _post(url, _access(key, url, scope="profile"), PING)).status_code == 403


@pytest.mark.parametrize(("answer", "ends"), [("decline", "withdrawn"), ("keep", "pending")])
async def test_a_desktop_client_is_asked_whether_to_keep_waiting_and_its_answer_grants_nothing(
    gate: Gate, surfaces: Surfaces, new_id: Any, answer: str, ends: str
) -> None:
    principal, asked = gate.agent(), []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        if answer == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"keep_waiting": True})

    parameters = _stdio(surfaces, principal)
    parameters.env = {**(parameters.env or {}), "EFFECTGATE_SURFACE_HOLD_S": "4", "EFFECTGATE_SURFACE_PROGRESS_S": "1"}
    async with Client(parameters, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("file_system__write", {"path": f"{new_id('e')}.txt", "content": "x"})
    text = text_of(result)
    assert len(asked) == 1 and "not an approval" in asked[0] and "ap-" in asked[0]
    request_id = _request_id_in(result)
    if ends == "withdrawn":
        assert result.is_error is True and "withdrawn" in text
        receipt = await gate.receipt(principal, request_id)
        assert (receipt.outcome, receipt.reason_code) == ("denied", "withdrawn")
    else:
        assert "pending approval ap-" in text
        assert await gate.is_pending(request_id)  # kept waiting: only an approver's answer ends it


def _request_id_in(result: Any) -> str:
    meta = result.meta or {}
    found = meta.get("io.effectgate/receipt") or meta.get("io.effectgate/pending")
    return str(found["request_id"])


async def test_a_denied_call_is_an_error_result_that_says_not_to_retry_unchanged(
    gate: Gate, surfaces: Surfaces, url: str
) -> None:
    """The file_system tool allows 5 calls a minute per principal: the sixth is denied by the policy."""
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        results = [await client.call_tool("file_system__list", {"path": "."}) for _ in range(6)]
    assert [r.is_error for r in results] == [False] * 5 + [True]
    text = text_of(results[-1])
    assert text.startswith("effectgate: denied (rate_limited)") and "fits again in" in text


@pytest.mark.parametrize(
    "arguments",
    [
        {"request_id": "r1", "offset_bytes": -5},
        {"request_id": "r1", "offset_bytes": "10"},
        {"request_id": "r1", "offset_bytes": True},
        {"request_id": "../../x"},
        {"request_id": 7},
        {},
        {"request_id": "r1", "principal": "a1-00"},
    ],
)
async def test_effectgate_result_refuses_what_it_cannot_read(
    gate: Gate, surfaces: Surfaces, url: str, arguments: dict[str, Any]
) -> None:
    async with http_client(url, surfaces.token_of(gate.agent()), "legacy") as client:
        refused = await client.call_tool("effectgate_result", arguments)
        assert refused.is_error is True and text_of(refused).startswith("effectgate: refused")
        assert (await client.call_tool("file_system__read", {"path": "hello.txt"})).is_error is False
