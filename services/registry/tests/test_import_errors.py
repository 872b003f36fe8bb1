"""The registry's account of an MCP server it could not list never ends in nothing."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from effectgate.contracts.errors import described
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.importing import McpImports, summary
from effectgate.shared.mcp.loading import parse_servers


@pytest.mark.parametrize(
    "error", [TimeoutError(), asyncio.CancelledError(), OSError(), ExceptionGroup("g", [TimeoutError()])]
)
def test_the_import_summary_of_an_error_without_a_message_says_what_it_means(error: BaseException) -> None:
    leaf = error.exceptions[0] if isinstance(error, ExceptionGroup) else error
    assert summary(error) == f"{type(leaf).__name__}: {described(leaf)}" and not summary(error).endswith(": ")


async def test_a_server_listed_too_slowly_is_logged_with_how_long_it_was_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(60)\n")
    table = {"slow": {"command": sys.executable, "args": ["hang.py"]}}
    imports = McpImports(parse_servers(table, tmp_path, "mcp.servers").values(), 1.0, import_mcp_server)

    with caplog.at_level(logging.ERROR, logger="effectgate.registry"):
        assert await imports.first() == []

    (line,) = [record.getMessage() for record in caplog.records if "'slow' not imported" in record.getMessage()]
    assert line.endswith("TimeoutError: no tools/list answer within 1 s (start, handshake and listing)"), line
