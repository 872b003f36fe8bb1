"""``effectgate config check``: one line per problem and exit 1, or a summary and exit 0; ``--json`` either way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.commands.config import up_env
from effectgate.shared.config.settings import MCP_SERVERS_ENV

DESCRIPTOR = (
    '{"name": "notes", "version": "1.0.0", "adapter": "file_system", "operations": {"read": {"input_schema": {}, '
    '"output_schema": {}, "side_effect_class": "READ_ONLY", "risk_tier": "low"}}}'
)


@pytest.fixture(autouse=True)
def no_outer_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EFFECTGATE_CONFIG", *MCP_SERVERS_ENV, "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"):
        monkeypatch.delenv(name, raising=False)


def check(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["config", "check", *args], env={"COLUMNS": "80"})
    return done.exit_code, done.output


@pytest.fixture
def good(tmp_path: Path) -> Path:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "notes.json").write_text(DESCRIPTOR)
    path = tmp_path / "effectgate.toml"
    path.write_text(
        f'[mcp.servers.time]\ncommand = "{sys.executable}"\n\n[tools]\ndescriptor_dirs = ["tools"]\n'
        '[tools.limits.mcp_time]\ntimeout_s = 5\n\n[chat]\nplatform = "slack"\n'
    )
    return path


def test_the_shipped_example_is_valid(repo_root: Path) -> None:
    code, output = check("--config", str(repo_root / "deploy" / "effectgate.toml"))

    assert code == 0, output
    assert "MCP servers: time (stdio: " in output and "(1 descriptor)" in output


def test_a_good_file_prints_a_summary(good: Path) -> None:
    code, output = check("--config", str(good))

    assert code == 0, output
    assert f"{good}: ok" in output
    assert "descriptor dirs: " in output and "(1 descriptor)" in output
    assert "limited tools: mcp_time" in output and "chat: slack" in output


def test_each_problem_is_one_line_and_the_exit_code_is_1(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text('[mcp.servers.git]\ncomand = "x"\n[tools]\ndescriptor_dirs = ["nowhere"]\n[chat]\nplatfrom = "x"\n')

    code, output = check("--config", str(path))

    assert code == 1
    assert output.splitlines() == [
        'error: effectgate.toml: mcp.servers.git.comand: unknown field; did you mean "command"?',
        'error: effectgate.toml: chat.platfrom: unknown field; did you mean "platform"?',
    ]


def test_missing_descriptor_dirs_and_bad_descriptors_are_problems(good: Path) -> None:
    (good.parent / "tools" / "broken.json").write_text('{"name": "Bad"}')
    good.write_text(good.read_text().replace('["tools"]', '["tools", "nowhere"]'))

    code, output = check("--config", str(good))

    assert code == 1
    assert "broken.json: Object missing required field `version`" in output
    assert f"tools.descriptor_dirs: {good.parent / 'nowhere'} is not a directory" in output


def test_the_file_comes_from_the_environment(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_CONFIG", str(good))

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
        "EFFECTGATE_MCP_SERVERS_FILE": str(servers.resolve()),
        "EFFECTGATE_CONFIG": str(good.resolve()),
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR": str(good.resolve().parent / "tools"),
        "EFFECTGATE_CHATOPS_PLATFORM": "slack",
    }
    assert up_env(None, None) == {}


def test_up_passes_relative_paths_made_absolute_with_their_symlinks_kept(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "linked").symlink_to(good.parent, target_is_directory=True)
    (good.parent / "servers.toml").write_text(f'[servers.a]\ncommand = "{sys.executable}"\n')
    monkeypatch.chdir(tmp_path)

    env = up_env(Path("linked/effectgate.toml"), Path("linked/servers.toml"))

    assert env["EFFECTGATE_MCP_SERVERS_FILE"] == str(tmp_path / "linked" / "servers.toml")
    assert env["EFFECTGATE_CONFIG"] == str(tmp_path / "linked" / "effectgate.toml")
    assert env["EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"] == str(tmp_path / "linked" / "tools")


def test_up_keeps_a_symlinked_state_dir_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import effectgate.cli.stack.up

    (tmp_path / "real").mkdir()
    (tmp_path / "state").symlink_to(tmp_path / "real")
    seen: list[Path] = []
    monkeypatch.setattr(effectgate.cli.stack.up, "run_up", lambda *args: seen.append(args[2]) or 0)
    monkeypatch.chdir(tmp_path)

    done = CliRunner().invoke(app, ["up", "--state-dir", "state"])

    assert done.exit_code == 0, done.output
    assert seen == [tmp_path / "state"]


def test_up_refuses_an_invalid_config_before_starting_anything(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text('[mcp.servers.git]\ncomand = "x"\n')

    done = CliRunner().invoke(app, ["up", "--config", str(path), "--state-dir", str(tmp_path / "state")])

    assert done.exit_code == 1
    assert 'mcp.servers.git.comand: unknown field; did you mean "command"?' in done.output
    assert not (tmp_path / "state").exists()


def test_an_upstream_url_must_be_http_and_header_variables_should_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from effectgate.cli.checks.config import _check_server

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


@pytest.fixture
def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "srv.toml"
    path.write_text(f'[servers.a]\ncommand = "{sys.executable}"\n[servers.up]\nurl = "https://h.example/mcp"\n')
    return path


@pytest.mark.parametrize("variable", MCP_SERVERS_ENV)
def test_an_invalid_servers_file_the_services_would_load_fails_the_check(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    bad = tmp_path / "srv.toml"
    bad.write_text('[servers.git]\ncomand = "x"\n[servers.up]\nurl = "ftp://h"\n')
    monkeypatch.setenv(variable, str(bad))

    code, output = check("--config", str(good))

    assert code == 1, output
    assert 'error: srv.toml: servers.git.comand: unknown field; did you mean "command"?' in output.splitlines()
    assert "error: srv.toml: servers.up: url: expected an http:// or https:// URL with a host, got 'ftp://h'" in output
    assert ("deprecated: set EFFECTGATE_MCP_SERVERS_FILE" in output) is (variable != "EFFECTGATE_MCP_SERVERS_FILE")


def test_the_summary_lists_the_servers_files_servers_in_place_of_the_configs(
    good: Path, servers_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_MCP_SERVERS_FILE", str(servers_file))

    code, output = check("--config", str(good))
    json_code, json_output = check("--config", str(good), "--json")

    assert code == 0, output
    assert f"MCP servers file: {servers_file}" in output
    assert f"MCP servers: a (stdio: {sys.executable}), up (http: https://h.example/mcp)" in output
    assert "warning: effectgate.toml: mcp.servers: not used; the services load the servers of" in output
    report = json.loads(json_output)
    assert json_code == 0 and report["servers_file"] == str(servers_file) and list(report["servers"]) == ["a", "up"]


def test_the_servers_variable_wins_over_its_deprecated_names_as_in_the_services(
    good: Path, servers_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_MCP_SERVERS_FILE", str(servers_file))
    monkeypatch.setenv("EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE", str(tmp_path / "missing.toml"))

    code, output = check("--config", str(good), "--json")

    assert code == 0, output
    assert json.loads(output)["servers_file"] == str(servers_file)


def test_the_mcp_servers_option_names_the_file_to_check(good: Path, servers_file: Path) -> None:
    code, output = check("--config", str(good), "--mcp-servers", str(servers_file), "--json")

    assert code == 0 and list(json.loads(output)["servers"]) == ["a", "up"]


def test_a_effectgate_toml_named_as_the_servers_file_is_checked_whole(good: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[mcp.servers.b]\ncommand = "no-such-mcp-server-xyz"\n[chat]\nroom = "x"\n')

    code, output = check("--config", str(good), "--mcp-servers", str(other))

    assert code == 1
    assert "error: other.toml: mcp.servers.b.command: command 'no-such-mcp-server-xyz' is not" in output
    assert "error: other.toml: chat.room: unknown field" in output


def test_a_servers_variable_set_but_empty_is_a_problem(good: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_MCP_SERVERS_FILE", "")

    code, output = check("--config", str(good))

    assert code == 1
    assert output.startswith("error: EFFECTGATE_MCP_SERVERS_FILE: set but empty (the services would read '.')")


def test_a_header_variable_of_the_servers_file_not_set_here_is_a_warning(good: Path, tmp_path: Path) -> None:
    path = tmp_path / "srv.toml"
    path.write_text('[servers.up]\nurl = "https://h.example/mcp"\nheaders_env = { Authorization = "UNSET_X1" }\n')

    code, output = check("--config", str(good), "--mcp-servers", str(path), "--json")

    assert code == 0 and json.loads(output)["warnings"][-1] == (
        "srv.toml: servers.up.headers_env.Authorization: environment variable UNSET_X1 is not set here"
    )


@pytest.mark.parametrize("which", ["config", "servers"])
def test_a_file_nested_a_thousand_deep_is_refused_naming_it(good: Path, tmp_path: Path, which: str) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 1000 + "]" * 1000 + "\n")
    args = ["--config", str(deep)] if which == "config" else ["--config", str(good), "--mcp-servers", str(deep)]

    code, output = check(*args)

    assert code == 1
    assert output.splitlines() == ["error: deep.toml: tables or arrays nested more than 64 levels deep"]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("which", ["config", "servers"])
def test_a_device_or_an_oversized_file_is_refused_without_reading_it(good: Path, tmp_path: Path, which: str) -> None:
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as file:
        file.truncate(64 * 1024**3)
    found = []
    for path in ("/dev/zero", str(huge)):
        args = ["--config", path] if which == "config" else ["--config", str(good), "--mcp-servers", path]
        found.append(check(*args))

    assert found == [
        (1, "error: /dev/zero: not a regular file (a character device); name a TOML file\n"),
        (1, f"error: {huge}: larger than 1048576 bytes (1 MiB), the limit for a configuration file\n"),
    ]


@pytest.mark.parametrize("source", ["config", "servers"])
def test_query_values_of_an_upstream_url_are_never_printed(good: Path, tmp_path: Path, source: str) -> None:
    table = '[{}.up]\nurl = "https://api.example/mcp?api_key=S3cret&v=2"\n'
    servers = tmp_path / "srv.toml"
    servers.write_text(table.format("servers"))
    if source == "config":
        good.write_text(table.format("mcp.servers") + good.read_text().split("\n\n", 1)[1])
    args = ("--config", str(good)) + (("--mcp-servers", str(servers)) if source == "servers" else ())

    code, output = check(*args)
    json_code, json_output = check(*args, "--json")

    assert code == json_code == 0, output
    assert "S3cret" not in output + json_output
    assert "up (http: https://api.example/mcp?api_key=***&v=***)" in output
    assert json.loads(json_output)["servers"]["up"] == "http: https://api.example/mcp?api_key=***&v=***"


def test_the_config_file_named_as_the_servers_file_too_is_checked_once(
    good: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good.write_text(good.read_text() + 'room = "x"\n')
    monkeypatch.setenv("EFFECTGATE_MCP_SERVERS_FILE", str(good))

    code, output = check("--config", str(good))

    assert code == 1 and output.splitlines() == [
        'error: effectgate.toml: chat.room: unknown field; did you mean "rooms"?'
    ]


def _descriptor_file(name: str, adapter: str = "file_system", **operation: str) -> str:
    schema = {"type": "object", "properties": {"memo": {"type": "string"}, "sum": {"type": "number"}}}
    spec = {"input_schema": schema, "output_schema": {}, "side_effect_class": "FINANCIAL", "risk_tier": "high"}
    return json.dumps(
        {"name": name, "version": "1.0.0", "adapter": adapter, "operations": {"pay": {**spec, **operation}}}
    )


@pytest.mark.parametrize(
    ("descriptor", "said"),
    [
        (
            _descriptor_file("pay", amount="/memo"),
            "pay.json: operations.pay.amount: '/memo' names an argument of type string",
        ),
        (
            _descriptor_file("pay", amount="/fee"),
            "pay.json: operations.pay.amount: '/fee': the input schema declares no",
        ),
        (
            _descriptor_file("pay", cost="/memo"),
            "pay.json: operations.pay.cost: '/memo' names an argument of type string",
        ),
        (_descriptor_file("pay", destination="/sum"), "pay.json: operations.pay.destination: '/sum' names an argument"),
        (_descriptor_file("pay", "python:mod.fn"), "pay.json: adapter: 'python:mod.fn' is no adapter the executor has"),
        (
            _descriptor_file("pay", "mcp:bank"),
            "pay.json: adapter: 'mcp:bank' names no configured MCP server (configured:",
        ),
    ],
)
def test_a_descriptor_whose_references_dangle_is_a_problem_naming_the_field(
    good: Path, descriptor: str, said: str
) -> None:
    (good.parent / "tools" / "pay.json").write_text(descriptor)

    code, output = check("--config", str(good), "--json")

    problems = [p for p in json.loads(output)["problems"] if "pay.json" in p]
    assert code == 1 and len(problems) == 1 and problems[0].startswith(f"{good.parent / 'tools'}/{said}"), problems


def test_a_descriptor_of_a_configured_mcp_server_with_typed_pointers_is_no_problem(good: Path) -> None:
    (good.parent / "tools" / "pay.json").write_text(_descriptor_file("pay", "mcp:time", amount="/sum", cost="/sum"))

    assert check("--config", str(good))[0] == 0


@pytest.mark.parametrize(("field", "pointer"), [("amount", "amount"), ("destination", ""), ("cost", "~2")])
def test_an_override_pointer_that_is_no_pointer_to_one_argument_is_a_problem(
    good: Path, field: str, pointer: str
) -> None:
    good.write_text(good.read_text() + f'\n[mcp.servers.time.overrides.get_time]\n{field} = "{pointer}"\n')

    code, output = check("--config", str(good), "--json")

    problems = json.loads(output)["problems"]
    assert code == 1 and problems[0].startswith(f"mcp.servers.time.overrides.get_time.{field}: "), problems


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the repository's, holding no effectgate.toml."""
    work = tmp_path / "elsewhere"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("EFFECTGATE_DEPLOY_DIR", raising=False)
    return work


def test_every_mistake_of_the_file_is_one_line_at_its_location(elsewhere: Path) -> None:
    path = elsewhere / "conf.toml"
    path.write_text(
        '[mcp.servers.git]\ncomand = "x"\nargz = []\n'
        "[tools.limits.mcp_git]\ntimeout = 3\nrate_limit = { calls = 1, period = 60 }\n"
        '[chat]\nplatfrom = "x"\nroom = "x"\n'
    )

    code, output = check("--config", str(path))

    assert code == 1
    assert output.splitlines() == [
        'error: conf.toml: mcp.servers.git.comand: unknown field; did you mean "command"?',
        'error: conf.toml: mcp.servers.git.argz: unknown field; did you mean "args"?',
        'error: conf.toml: tools.limits.mcp_git.timeout: unknown field; did you mean "timeout_s"?',
        'error: conf.toml: tools.limits.mcp_git.rate_limit.period: unknown field; did you mean "period_s"?',
        'error: conf.toml: chat.platfrom: unknown field; did you mean "platform"?',
        'error: conf.toml: chat.room: unknown field; did you mean "rooms"?',
    ]


def test_a_servers_file_is_checked_without_a_effectgate_toml_as_up_runs_without_one(
    elsewhere: Path, servers_file: Path, repo_root: Path
) -> None:
    code, output = check("--mcp-servers", str(servers_file))

    assert code == 0, output
    assert output.splitlines()[0] == "no effectgate.toml (as `up` without --config): ok"
    assert f"MCP servers file: {servers_file}" in output and "MCP servers: a (stdio: " in output
    assert f"descriptor dirs: {repo_root / 'deploy' / 'tools'} (1 descriptor), from the default" in " ".join(
        output.split()
    )


def test_a_effectgate_toml_in_the_working_directory_is_checked_and_said_to_be_unread_by_up(elsewhere: Path) -> None:
    (elsewhere / "effectgate.toml").write_text('[chat]\nplatform = "slack"\n')

    code, output = check()

    assert code == 0, output
    said = " ".join(output.split())
    assert f"note: checked {elsewhere / 'effectgate.toml'}, found here; `up` reads it only when --config" in said
    assert f"{elsewhere / 'effectgate.toml'}: ok" in said and "chat: slack" in said


@pytest.mark.parametrize("source", ["default", "file", "exported"])
def test_the_descriptor_dirs_checked_are_the_ones_up_gives_the_registry(
    elsewhere: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    from effectgate.cli.stack.launch import chosen_config

    for name in ("mine", "exported"):
        (elsewhere / name).mkdir()
        (elsewhere / name / "notes.json").write_text(DESCRIPTOR)
    path = elsewhere / "conf.toml"
    path.write_text('[tools]\ndescriptor_dirs = ["mine"]\n' if source != "default" else "")
    if source == "exported":
        monkeypatch.setenv("EFFECTGATE_REGISTRY_DESCRIPTORS_DIR", "exported")

    code, output = check("--config", str(path), "--json")

    registry_reads = chosen_config(up_env(path, None))["EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"]
    report = json.loads(output)
    assert code == 0, output
    assert list(report["descriptor_dirs"]) == registry_reads.split(os.pathsep)
    assert (
        registry_reads
        == {
            "default": str(repo_root / "deploy" / "tools"),
            "file": str(elsewhere / "mine"),
            "exported": str(elsewhere / "exported"),
        }[source]
    )
    assert report["descriptor_dirs_from"].startswith(
        {"default": "the default", "file": "conf.toml: tools.descriptor_dirs", "exported": "EFFECTGATE_REGISTRY"}[
            source
        ]
    )
