"""An MCP server's file arguments: declared by the operator, marked in the schema, rooted in its ``file_root``."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.tools.file_references import FILE_MARKER, file_places
from effectgate.shared.mcp.loading import load_mcp_servers
from effectgate.shared.mcp.mapping import McpToolInfo, descriptor_from_mcp, input_schema
from effectgate.shared.mcp.servers import McpServerConfig, Override

ADD = McpToolInfo(
    name="git_add",
    description="stage files",
    input_schema={
        "type": "object",
        "properties": {"repo_path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}}},
        "required": ["repo_path", "files"],
    },
)


def _config(**fields: object) -> McpServerConfig:
    return McpServerConfig(name="git", command="/bin/true", pinned_arguments={"repo_path": "/r"}, **fields)  # type: ignore[arg-type]


def test_the_declared_arguments_are_marked_and_nothing_else_changes() -> None:
    schema = input_schema(ADD.input_schema, {"repo_path": "/r"}, ("files",))

    assert schema["properties"]["files"] == {"type": "array", "items": {"type": "string"}, FILE_MARKER: True}
    assert schema["properties"]["repo_path"] == {"const": "/r"}
    assert file_places(schema) == (("files",),)
    assert FILE_MARKER not in ADD.input_schema["properties"]["files"]  # the listing is not modified


@pytest.mark.parametrize("name", ["paths", "repo_path"], ids=["no-such-argument", "pinned"])
def test_a_file_argument_the_tool_does_not_let_a_call_set_is_refused_naming_the_key(name: str) -> None:
    config = _config(overrides={"git_add": Override(file_arguments=(name,))})

    with pytest.raises(ValueError, match=r"servers\.git\.overrides\.git_add\.file_arguments: '"):
        descriptor_from_mcp(config, "1.0.0", [ADD])


def test_file_root_is_resolved_against_the_files_directory_and_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    table = '[servers.git]\ncommand = "/bin/true"\nfile_root = "{root}"\n'
    table += '[servers.git.overrides.git_add]\nfile_arguments = ["files"]\n'
    path = tmp_path / "mcp.toml"
    path.write_text(table.format(root="repo"))

    git = load_mcp_servers(path)["git"]

    assert git.file_root == str(tmp_path / "repo") and git.overrides["git_add"].file_arguments == ("files",)
    path.write_text(table.format(root="missing"))
    with pytest.raises(ValueError, match=r"servers\.git\.file_root: .* is not a directory"):
        load_mcp_servers(path)


def test_a_server_without_a_file_root_leaves_it_empty(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text('[servers.git]\ncommand = "/bin/true"\n')

    assert load_mcp_servers(path)["git"].file_root == ""
