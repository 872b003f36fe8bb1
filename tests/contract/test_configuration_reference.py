"""docs/reference/configuration.md has a row for every key of an MCP server's table, and says where credentials go."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from effectgate.shared.mcp.servers import McpServerConfig


def _configuration(repo_root: Path) -> str:
    return (repo_root / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")


def _rows(section: str) -> dict[str, str]:
    return {found[1]: found[2] for found in re.finditer(r"^\| `([^`]+)` \| (.*) \|$", section, re.MULTILINE)}


def test_every_server_key_has_a_row(repo_root: Path) -> None:
    keys = {field.name for field in msgspec.structs.fields(McpServerConfig)} - {"name", "overrides"}

    assert keys <= set(_rows(_configuration(repo_root))), keys - set(_rows(_configuration(repo_root)))


def test_credentials_belong_in_headers_env_and_query_values_are_never_printed(repo_root: Path) -> None:
    rows = _rows(_configuration(repo_root))

    assert "Credentials belong here" in rows["headers_env"]
    assert "never prints its query values" in rows["url"] and "put no credential there" in rows["url"]
