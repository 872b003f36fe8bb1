"""The agent SDK against the real system: listing, duplicate ids, receipts read back later."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.sdk import DuplicateRequest

pytestmark = pytest.mark.e2e


async def test_list_tools_shows_the_registry(gate: Any) -> None:
    async with await gate.connect(gate.agent()) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert "file_system" in tools
        assert set(tools["file_system"].operations) == {"read", "list", "write"}
        assert (await client.describe("file_system")).version == tools["file_system"].version


async def test_a_reused_request_id_is_reported_not_silently_merged(gate: Any, new_id: Any) -> None:
    request_id = new_id("r")
    async with await gate.connect(gate.agent()) as client:
        await client.submit("file_system", "read", {"path": "hello.txt"}, request_id=request_id)
        with pytest.raises(DuplicateRequest):
            await client.submit("file_system", "read", {"path": "notes/a.txt"}, request_id=request_id)
        assert (await client.receipt(request_id, timeout_s=20)).outcome == "succeeded"


async def test_a_new_client_reads_a_receipt_issued_while_it_was_away(gate: Any) -> None:
    agent = gate.agent()
    async with await gate.connect(agent) as first:
        request_id = await first.submit("file_system", "read", {"path": "hello.txt"})
        issued = await first.receipt(request_id, timeout_s=20)
    async with await gate.connect(agent) as later:
        again = await later.receipt(request_id, timeout_s=5)
    assert again == issued and again.outcome == "succeeded"
