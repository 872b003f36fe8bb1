"""``toolgate config check``: one line per problem and exit 1, or a summary and exit 0; ``--json`` either way."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolgate.cli.app import app
from toolgate.cli.config_commands import up_env

DESCRIPTOR = (
    '{"name": "notes", "version": "1.0.0", "adapter": "file_system", "operations": {"read": {"input_schema": {}, '
    '"output_schema": {}, "side_effect_class": "READ_ONLY", "risk_tier": "low"}}}'
)


@pytest.fixture(autouse=True)
def no_outer_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOLGATE_CONFIG", "TOOLGATE_MCP_SERVERS_FILE", "TOOLGATE_REGISTRY_DESCRIPTORS_DIR"):
        monkeypatch.delenv(name, raising=False)


def check(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["config", "check", *args], env={"COLUMNS": "80"})
    return done.exit_code, done.output


@pytest.fixture
def good(tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "notes.json").write_text(DESCRIPTOR)
    path = tmp_path / "toolgate.toml"
    path.write_text(
        f'[mcp.servers.time]\ncommand = "{sys.executable}"\n\n[tools]\ndescriptor_dirs = ["tools"]\n'
        '[tools.limits.mcp_time]\ntimeout_s = 5\n\n[chat]\nplatform = "slack"\n'
    )
    return path


def test_the_shipped_example_is_valid(repo_root: Path) -> None:
    code, output = check("--config", str(repo_root / "deploy" / "toolgate.toml"))

    assert code == 0, output
    assert "MCP servers: time (stdio: " in output and "(1 descriptors)" in output


def test_a_good_file_prints_a_summary(good: Path) -> None:
    code, output = check("--config", str(good))

    assert code == 0, output
    assert f"{good}: ok" in output
    assert "descriptor dirs: " in output and "(1 descriptors)" in output
    assert "limited tools: mcp_time" in output and "chat: slack" in output


def test_each_problem_is_one_line_and_the_exit_code_is_1(tmp_path: Path) -> None:
    path = tmp_path / "toolgate.toml"
    path.write_text('[mcp.servers.git]\ncomand = "x"\n[tools]\ndescriptor_dirs = ["nowhere"]\n[chat]\nplatfrom = "x"\n')

    code, output = check("--config", str(path))

    assert code == 1
    assert output.splitlines() == [
        'error: toolgate.toml: mcp.servers.git.comand: unknown field; did you mean "command"?',
        'error: toolgate.toml: chat.platfrom: unknown field; did you mean "platform"?',
    ]


def test_missing_descriptor_dirs_and_bad_descriptors_are_problems(good: Path) -> None:
    (good.parent / "tools" / "broken.json").write_text('{"name": "Bad"}')
    good.write_text(good.read_text().replace('["tools"]', '["tools", "nowhere"]'))

    code, output = check("--config", str(good))

    assert code == 1
    assert "broken.json: Object missing required field `version`" in output
    assert f"tools.descriptor_dirs: {good.parent / 'nowhere'} is not a directory" in output


def test_the_file_comes_from_the_environment(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGATE_CONFIG", str(good))

    assert check()[0] == 0


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    code, output = check("--config", str(tmp_path / "nope.toml"))

    assert code == 1 and "nope.toml: cannot be read" in output


def test_json_reports_problems_and_summary(good: Path, tmp_path: Path) -> None:
    code, output = check("--config", str(good), "--json")
    bad = tmp_path / "bad.toml"
    bad.write_text("[tools.limits.x]\ntimeout_s = -1\n")
    bad_code, bad_output = check("--config", str(bad), "--json")

    report = json.loads(output)
    assert code == 0 and report["ok"] is True and list(report["servers"]) == ["time"]
    assert report["chat"] == "slack" and report["limited_tools"] == ["mcp_time"]
    assert bad_code == 1 and json.loads(bad_output)["problems"] == [
        "bad.toml: tools.limits.x.timeout_s: must be a number of seconds above 0, got -1.0"
    ]


def test_up_passes_absolute_paths_and_the_files_descriptor_dirs(good: Path, tmp_path: Path) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[servers.a]\ncommand = "{sys.executable}"\n')

    env = up_env(good, servers)

    assert env == {
        "TOOLGATE_MCP_SERVERS_FILE": str(servers.resolve()),
        "TOOLGATE_CONFIG": str(good.resolve()),
        "TOOLGATE_REGISTRY_DESCRIPTORS_DIR": str(good.resolve().parent / "tools"),
        "TOOLGATE_CHATOPS_PLATFORM": "slack",
    }
    assert up_env(None, None) == {}


def test_up_refuses_an_invalid_config_before_starting_anything(tmp_path: Path) -> None:
    path = tmp_path / "toolgate.toml"
    path.write_text('[mcp.servers.git]\ncomand = "x"\n')

    done = CliRunner().invoke(app, ["up", "--config", str(path), "--state-dir", str(tmp_path / "state")])

    assert done.exit_code == 1
    assert 'mcp.servers.git.comand: unknown field; did you mean "command"?' in done.output
    assert not (tmp_path / "state").exists()


def test_an_upstream_url_must_be_http_and_header_variables_should_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from toolgate.cli.config_check import _check_server

    monkeypatch.setenv("SET_TOKEN", "x")
    monkeypatch.delenv("UNSET_TOKEN", raising=False)
    problems: list[str] = []
    warnings: list[str] = []
    bad = SimpleNamespace(url="ftp://host/mcp", headers_env={"Authorization": "UNSET_TOKEN", "X-Key": "SET_TOKEN"})
    good = SimpleNamespace(url="https://mcp.example.org/mcp", headers_env={})

    _check_server("t.toml: mcp.servers.up", bad, problems, warnings)  # type: ignore[arg-type]
    _check_server("t.toml: mcp.servers.ok", good, problems, warnings)  # type: ignore[arg-type]

    assert problems == ["t.toml: mcp.servers.up.url: not an http(s) URL with a host: 'ftp://host/mcp'"]
    assert warnings == [
        "t.toml: mcp.servers.up.headers_env.Authorization: environment variable UNSET_TOKEN is not set here"
    ]
