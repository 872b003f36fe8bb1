"""Real MCP clients governed through the MCP surface: an agent framework's, and the SDK's own in both eras.

The framework is Pydantic AI (``MCPToolset``, on FastMCP's client), run offline: its tools are
called directly (``direct_call_tool``) or by a scripted model (``FunctionModel``), never an LLM.
Each client (:data:`CLIENTS`), as principal ``a1-NN`` (a read runs, a write needs one operator's
approval):

- lists the principal's tools, one per operation, as the client presents them;
- reads: the file's content comes back;
- writes: the call answers *pending approval ap-…*; an approver runs ``effectgate approvals
  approve``; the same call with the same arguments returns the outcome, and the tool ran once;
- reads outside the sandbox: an error, nothing read;
- cancels a write while it waits for its approval: the request ends ``denied`` / ``withdrawn``
  and its approval is no longer pending (legacy clients send ``notifications/cancelled``,
  2026-07-28 clients drop the request).

Two surfaces: ``quick`` holds a call 2 s before answering pending; ``held`` holds it 120 s, so a
call is certainly still held when a test cancels it.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from .mcp_clients_support import (
    CLIENTS,
    approve_with_cli,
    caller,
    framework_toolset,
    until_approval,
    until_outcome,
    waiting_approval,
)
from .surface_support import Surfaces, http_client

pytestmark = pytest.mark.e2e

APPROVAL = re.compile(r"pending approval (ap-[0-9a-f]{12})")
APPROVAL_ID = re.compile(r"\bap-[0-9a-f]{12}\b")
OPERATIONS = {"file_system__read", "file_system__list", "file_system__write", "effectgate_result"}


@dataclass(frozen=True)
class Urls:
    quick: str
    held: str


@pytest.fixture(scope="module")
def urls(surfaces: Surfaces) -> Urls:
    quick = surfaces.start(EFFECTGATE_SURFACE_HOLD_S="2", EFFECTGATE_SURFACE_PROGRESS_S="1")
    return Urls(quick, surfaces.start(EFFECTGATE_SURFACE_HOLD_S="120"))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_framework_gives_its_model_one_tool_per_operation(
    mode: str, gate: Any, surfaces: Surfaces, urls: Urls
) -> None:
    seen: list[ToolDefinition] = []

    def look(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.extend(info.function_tools)
        return ModelResponse(parts=[TextPart("looked")])

    toolset = framework_toolset(urls.quick, surfaces.token_of(gate.agent(1)), mode)
    await Agent(FunctionModel(look), toolsets=[toolset]).run("Which tools do you have?")

    tools = {tool.name: tool for tool in seen}
    assert set(tools) == OPERATIONS
    read = tools["file_system__read"].parameters_json_schema
    assert read["type"] == "object" and "path" in read["properties"] and "path" in read.get("required", [])
    assert {"path", "content"} <= set(tools["file_system__write"].parameters_json_schema["properties"])


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_lists_one_tool_per_operation(mode: str, gate: Any, surfaces: Surfaces, urls: Urls) -> None:
    async with http_client(urls.quick, surfaces.token_of(gate.agent(1)), mode) as client:
        listed = await client.list_tools()

    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == OPERATIONS
    assert "path" in tools["file_system__read"].input_schema["properties"]
    assert tools["file_system__read"].annotations is not None and tools["file_system__read"].annotations.read_only_hint


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_read_returns_the_file(kind: str, gate: Any, surfaces: Surfaces, urls: Urls) -> None:
    async with caller(kind, urls.quick, surfaces.token_of(gate.agent(1))) as call:
        answer = await call("file_system__read", {"path": "hello.txt"})

    assert not answer.is_error, answer.text
    assert "hello from the sandbox" in answer.text


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_read_outside_the_sandbox_is_an_error(kind: str, gate: Any, surfaces: Surfaces, urls: Urls) -> None:
    async with caller(kind, urls.quick, surfaces.token_of(gate.agent(1))) as call:
        answer = await call("file_system__read", {"path": "../outside/secret.txt"})

    assert answer.is_error and re.match(r"effectgate: (refused|denied|failed) \(", answer.text), answer.text
    assert "outside secret" not in answer.text


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_write_is_pending_then_approved_and_runs_once(
    kind: str, gate: Any, surfaces: Surfaces, urls: Urls, new_id: Any
) -> None:
    principal, path = gate.agent(1), f"{new_id('mcp')}.txt"
    arguments = {"path": path, "content": f"written by {kind}"}
    async with caller(kind, urls.quick, surfaces.token_of(principal)) as call:
        pending = await until_approval(call, "file_system__write", arguments)
        approval = APPROVAL.search(pending.text)
        assert pending.is_error and approval is not None, pending.text
        listed = await waiting_approval(gate, principal)
        assert listed["approval_id"] == approval[1] and listed["request"]["arguments"] == arguments
        approved = await approve_with_cli(gate.stack, approval[1], "alice")
        assert approved.returncode == 0, approved.stdout + approved.stderr
        outcome = await until_outcome(call, "file_system__write", arguments)
        again = await call("file_system__write", arguments)

    assert not outcome.is_error, outcome.text
    assert again == outcome
    assert (gate.paths.sandbox / path).read_text() == f"written by {kind}"
    assert await gate.count(f"tg.req.{principal}") == 1
    assert await gate.count(f"tg.receipt.{principal}.*") == 1


@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_cancelled_call_waiting_for_approval_is_withdrawn(
    kind: str, gate: Any, surfaces: Surfaces, urls: Urls, new_id: Any
) -> None:
    principal, path = gate.agent(1), f"{new_id('cancelled')}.txt"
    async with caller(kind, urls.held, surfaces.token_of(principal)) as call:
        task = asyncio.create_task(call("file_system__write", {"path": path, "content": "never"}))
        listed = await waiting_approval(gate, principal)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        receipt = await gate.receipt(principal, listed["request_id"])

    assert (receipt.outcome, receipt.reason_code) == ("denied", "withdrawn"), receipt.reason
    assert not await gate.is_pending(listed["request_id"])
    assert not (gate.paths.sandbox / path).exists()


def scripted_model(write: dict[str, Any]) -> FunctionModel:
    """A model that does as the tool says: told *pending approval*, it waits until the user says approved.

    It calls the write; told that the call waits for an approval, it says so and ends its turn, or,
    once the user said the call is approved, calls it again with the same arguments (as it does
    when told *pending* with no approval named yet); told the outcome, it reports it.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        said = [str(part.content) for message in messages for part in message.parts if isinstance(part, UserPromptPart)]
        if isinstance(last, ToolReturnPart) and last.outcome == "success":
            return ModelResponse(parts=[TextPart(f"Done: {json.dumps(last.content)}")])
        found = APPROVAL_ID.search(str(last.content)) if isinstance(last, ToolReturnPart) else None
        if found and not any(text.startswith("It is approved") for text in said):
            return ModelResponse(parts=[TextPart(f"Waiting for a person to approve {found[0]}.")])
        return ModelResponse(parts=[ToolCallPart("file_system__write", write)])

    return FunctionModel(respond)


def transcript(messages: list[ModelMessage]) -> list[str]:
    """One line per part of the conversation (continuation lines indented)."""
    lines = []
    for part in (part for message in messages for part in message.parts):
        if isinstance(part, UserPromptPart):
            lines.append(f"user     > {part.content}")
        elif isinstance(part, ToolCallPart):
            lines.append(f"model    > calls {part.tool_name} {part.args_as_json_str()}")
        elif isinstance(part, ToolReturnPart):
            content = part.content if isinstance(part.content, str) else json.dumps(part.content)
            lines.append(f"effectgate < ({part.outcome}) {content}")
        elif isinstance(part, TextPart):
            lines.append(f"model    > {part.content}")
    return [line.replace("\n", "\n           ") for line in lines]


async def test_a_framework_agent_waits_for_the_approval_then_gets_the_outcome(
    gate: Any, surfaces: Surfaces, urls: Urls, new_id: Any
) -> None:
    principal, path = gate.agent(1), f"{new_id('agent')}.txt"
    write = {"path": path, "content": "written after approval"}
    toolset = framework_toolset(urls.quick, surfaces.token_of(principal), max_retries=10)
    agent = Agent(scripted_model(write), toolsets=[toolset])
    async with agent:
        first = await agent.run(f"Write 'written after approval' to {path}.")
        era = toolset.client.protocol_version
        approval = APPROVAL_ID.search(str(first.output))
        assert approval is not None, first.output
        approved = await approve_with_cli(gate.stack, approval[0], "alice")
        assert approved.returncode == 0, approved.stdout + approved.stderr
        second = await agent.run("It is approved now: go on.", message_history=first.all_messages())

    command = f"$ effectgate approvals approve {approval[0]} --as alice\n{approved.stdout.strip()}"
    client = f"pydantic-ai {version('pydantic-ai-slim')} MCPToolset, fastmcp {version('fastmcp-slim')}, MCP {era}"
    print(
        "\n".join(
            [
                "",
                f"client   : {client}",
                *transcript(first.all_messages()),
                f"approver {command}",
                *transcript(second.new_messages()),
            ]
        )
    )
    returns = [part for message in second.new_messages() for part in message.parts if isinstance(part, ToolReturnPart)]
    assert returns[-1].outcome == "success" and returns[-1].content["path"] == path, returns
    assert str(first.output) == f"Waiting for a person to approve {approval[0]}."
    assert (gate.paths.sandbox / path).read_text() == "written after approval"
    assert await gate.count(f"tg.req.{principal}") == 1
    assert await gate.count(f"tg.receipt.{principal}.*") == 1
