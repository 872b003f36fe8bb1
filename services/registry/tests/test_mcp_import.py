import json
import logging
import subprocess
import sys
from pathlib import Path

import jsonschema_rs
import pytest

from effectgate.contracts.tools.descriptors import SEMVER, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.registry.adapters.mcp_import import import_mcp_server, list_mcp_tools
from effectgate.registry.app import _seed, _servers
from effectgate.registry.importing import McpImports
from effectgate.registry.settings import RegistrySettings
from effectgate.shared.mcp.loading import resolve_command
from effectgate.shared.mcp.servers import McpServerConfig, Override


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(path), "add", "a.txt"], check=True)
    identity = ["-c", "user.name=T", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "-C", str(path), *identity, "commit", "-q", "-m", "first"], check=True)
    return path


def time_config(**kw: object) -> McpServerConfig:
    return McpServerConfig(
        name="time",
        command=resolve_command("mcp-server-time"),
        args=["--local-timezone", "UTC"],
        **{"trust_hints": True, **kw},  # type: ignore[arg-type]
    )


def git_config(repo: Path, **kw: object) -> McpServerConfig:
    return McpServerConfig(
        name="git",
        command=resolve_command("mcp-server-git"),
        args=["--repository", str(repo)],
        pinned_arguments={"repo_path": str(repo)},
        **{"trust_hints": True, **kw},  # type: ignore[arg-type]
    )


def assert_schemas_compile(descriptor: ToolDescriptor) -> None:
    for name, operation in descriptor.operations.items():
        for schema in (operation.input_schema, operation.output_schema):
            assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
            jsonschema_rs.validator_for(schema)


async def test_time_server_imports_as_read_only_descriptor() -> None:
    descriptor = await import_mcp_server(time_config(), timeout_s=30.0)

    assert descriptor.name == "mcp_time" and descriptor.adapter == "mcp:time"
    assert SEMVER.match(descriptor.version) and descriptor.version != "0.0.0"
    operation = descriptor.operations["get_current_time"]
    assert operation.side_effect_class is SideEffectClass.READ_ONLY
    assert operation.risk_tier is RiskTier.TRIVIAL  # closed world
    assert "convert_time" in descriptor.operations
    assert operation.input_schema["required"] == ["timezone"]
    structured = operation.output_schema["properties"]["structured"]
    assert "datetime" in structured["properties"]
    assert_schemas_compile(descriptor)


async def test_git_server_classes_and_pinned_repo(repo: Path) -> None:
    descriptor = await import_mcp_server(git_config(repo), timeout_s=30.0)
    ops = descriptor.operations

    assert descriptor.name == "mcp_git"
    assert ops["git_log"].side_effect_class is SideEffectClass.READ_ONLY
    assert ops["git_status"].side_effect_class is SideEffectClass.READ_ONLY
    assert ops["git_commit"].side_effect_class is not SideEffectClass.READ_ONLY
    assert ops["git_commit"].side_effect_class is SideEffectClass.REVERSIBLE_WRITE
    assert ops["git_reset"].side_effect_class is SideEffectClass.IRREVERSIBLE_WRITE
    assert ops["git_reset"].risk_tier is RiskTier.HIGH
    assert_schemas_compile(descriptor)
    log_input = jsonschema_rs.validator_for(ops["git_log"].input_schema)
    assert log_input.is_valid({"repo_path": str(repo), "max_count": 2})
    assert not log_input.is_valid({"repo_path": "/etc", "max_count": 2})


async def test_overrides_are_applied_or_refused(repo: Path) -> None:
    stricter = {"git_log": Override(side_effect_class=SideEffectClass.SECURITY_SENSITIVE)}
    descriptor = await import_mcp_server(git_config(repo, overrides=stricter))
    assert descriptor.operations["git_log"].side_effect_class is SideEffectClass.SECURITY_SENSITIVE

    looser = {"git_reset": Override(side_effect_class=SideEffectClass.READ_ONLY)}
    with pytest.raises(ValueError, match="git_reset"):
        await import_mcp_server(git_config(repo, overrides=looser))


async def test_an_untrusted_servers_read_only_hints_loosen_nothing() -> None:
    untrusted = await import_mcp_server(time_config(trust_hints=False))
    lowered = await import_mcp_server(
        time_config(
            trust_hints=False,
            default_side_effect_class=SideEffectClass.READ_ONLY,
            default_risk_tier=RiskTier.LOW,
        )
    )

    operation = untrusted.operations["get_current_time"]
    assert (operation.side_effect_class, operation.risk_tier) == (SideEffectClass.IRREVERSIBLE_WRITE, RiskTier.HIGH)
    operation = lowered.operations["get_current_time"]
    assert (operation.side_effect_class, operation.risk_tier) == (SideEffectClass.READ_ONLY, RiskTier.LOW)


async def test_listing_reports_annotations_by_wire_name() -> None:
    version, tools = await list_mcp_tools(time_config())

    assert version and version != "0.0.0"  # the reference server identifies itself
    by_name = {tool.name: tool for tool in tools}
    annotations = by_name["get_current_time"].annotations
    assert annotations is not None
    assert annotations["readOnlyHint"] is True and annotations["openWorldHint"] is False
    assert by_name["get_current_time"].output_schema is not None


async def test_unstartable_server_raises() -> None:
    broken = McpServerConfig(name="broken", command="/nonexistent/mcp-server")
    with pytest.raises(OSError):
        await list_mcp_tools(broken, timeout_s=10.0)


async def test_a_server_that_crashes_at_start_up_is_named_and_does_not_stop_the_registry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers = tmp_path / "servers.toml"
    crash = "import sys; print('boom', file=sys.stderr); sys.exit(1)"
    servers.write_text(f'[servers.notes]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(crash)}]\n')
    settings = RegistrySettings(descriptors_dir=None, mcp_servers_file=servers)

    with caplog.at_level(logging.DEBUG, logger="effectgate.registry"):
        seeded = await _seed(settings, McpImports(_servers(settings), 10.0, import_mcp_server))

    assert seeded == []
    lines = [record.getMessage() for record in caplog.records if record.name == "effectgate.registry"]
    assert "MCP server 'notes' stderr: boom" in lines  # the server's stderr, one record per line
    (line,) = [line for line in lines if "not imported" in line]
    assert line.startswith("MCP server 'notes' not imported, it could not be listed (retried in the background): ")
    assert line.endswith("its last line on stderr: boom")
    assert "Traceback" not in caplog.text
