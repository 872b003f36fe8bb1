import os
import stat
import sys
from pathlib import Path

import pytest

from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.config.effectgate_file import ConfigInvalid
from effectgate.shared.mcp.loading import load_mcp_servers, parse_servers, resolve_command
from effectgate.shared.mcp.servers import DEFAULT_MCP_RATE_LIMIT, McpServerConfig, Override, header_values, stdio_launch
from effectgate.shared.mcp.upstream import masked_url

VALID = """
[servers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]

[servers.git]
command = "mcp-server-git"
args = ["--repository", "/srv/repo"]
env = { GIT_TERMINAL_PROMPT = "0" }
pinned_arguments = { repo_path = "/srv/repo", max_count = 5 }

[servers.git.overrides.git_log]
side_effect_class = "READ_ONLY"

[servers.git.overrides.git_commit]
side_effect_class = "IRREVERSIBLE_WRITE"
risk_tier = "critical"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_loads_servers_with_pins_and_overrides(tmp_path: Path) -> None:
    servers = load_mcp_servers(write(tmp_path, VALID))

    assert sorted(servers) == ["git", "time"]
    git = servers["git"]
    assert git.name == "git"
    assert git.args == ["--repository", "/srv/repo"]
    assert git.env == {"GIT_TERMINAL_PROMPT": "0"}
    assert git.pinned_arguments == {"repo_path": "/srv/repo", "max_count": 5}
    assert git.overrides == {
        "git_log": Override(side_effect_class=SideEffectClass.READ_ONLY),
        "git_commit": Override(side_effect_class=SideEffectClass.IRREVERSIBLE_WRITE, risk_tier=RiskTier.CRITICAL),
    }
    assert servers["time"].env == {} and servers["time"].pinned_arguments == {} and servers["time"].overrides == {}


def test_bare_command_resolves_next_to_the_interpreter_first(tmp_path: Path) -> None:
    servers = load_mcp_servers(write(tmp_path, VALID))

    expected = Path(sys.executable).parent / "mcp-server-time"
    assert servers["time"].command == str(expected)
    assert os.path.isabs(servers["git"].command)


def test_config_is_frozen(tmp_path: Path) -> None:
    server = load_mcp_servers(write(tmp_path, VALID))["time"]
    with pytest.raises(AttributeError):
        server.command = "/bin/sh"  # type: ignore[misc]


def test_relative_path_command_resolves_against_the_config_directory(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "my-server"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)

    servers = load_mcp_servers(write(tmp_path, '[servers.mine]\ncommand = "bin/my-server"\n'))

    assert servers["mine"].command == str(script.resolve())


@pytest.mark.parametrize(("cwd", "expected"), [(None, "."), ("work", "work"), ("work/../work", "work")])
def test_a_stdio_server_runs_in_the_files_directory_or_its_cwd_relative_to_it(
    tmp_path: Path, cwd: str | None, expected: str
) -> None:
    (tmp_path / "work").mkdir()
    line = f'cwd = "{cwd}"\n' if cwd else ""
    servers = load_mcp_servers(write(tmp_path, f'[servers.mine]\ncommand = "{sys.executable}"\n{line}'))

    assert servers["mine"].cwd == str((tmp_path / expected).resolve())
    assert stdio_launch(servers["mine"])["cwd"] == servers["mine"].cwd


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('command = "{python}"\ncwd = "missing"', "servers.mine.cwd: "),
        ('url = "https://example.invalid/mcp"\ncwd = "."', "cwd: applies only to a server with a command"),
    ],
)
def test_a_cwd_that_is_no_directory_or_on_an_http_upstream_is_refused(tmp_path: Path, table: str, named: str) -> None:
    path = write(tmp_path, "[servers.mine]\n" + table.format(python=sys.executable) + "\n")

    with pytest.raises(ValueError, match=named):
        load_mcp_servers(path)


def test_command_on_path_and_absolute() -> None:
    assert resolve_command("sh") in {"/bin/sh", "/usr/bin/sh"}
    assert resolve_command("/bin/sh") == "/bin/sh"


def test_missing_command_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, '[servers.ghost]\ncommand = "no-such-mcp-server-xyz"\n')
    with pytest.raises(ValueError, match=r"servers\.ghost\.command: .*no-such-mcp-server-xyz"):
        load_mcp_servers(path)


def test_empty_file_has_no_servers(tmp_path: Path) -> None:
    assert load_mcp_servers(write(tmp_path, "")) == {}


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('[servers.Bad]\ncommand = "sh"\n', r"servers\.Bad: server name must match"),
        ('[servers.a-b]\ncommand = "sh"\n', r"servers\.a-b: server name must match"),
        (f'[servers.{"x" * 32}]\ncommand = "sh"\n', r"server name must match"),
        ("[servers.x]\ncommand = 5\n", r"servers\.x\.command: expected `str`, got `int`"),
        ('[servers.x]\ncommand = "sh"\nargs = ["ok", 2]\n', r"servers\.x\.args\[1\]: expected `str`"),
        ('[servers.x]\ncommand = "sh"\nenv = { A = 1 }\n', r"servers\.x\.env"),
        ('[servers.x]\ncommand = "sh"\ncolour = "red"\n', r"servers\.x\.colour: unknown field"),
        ("[servers.x]\nargs = []\n", r"servers\.x: set exactly one of command \(a stdio server\) and url"),
        ('[servers.x]\ncommand = "sh"\nurl = "http://h/mcp"\n', r"servers\.x: set exactly one of command"),
        ('[servers.x]\nurl = "ftp://h/mcp"\n', r"servers\.x: url: expected an http:// or https:// URL"),
        ('[servers.x]\nurl = "https:///mcp"\n', r"servers\.x: url: expected .* with a host"),
        ('[servers.x]\nurl = "https://u:p@h/mcp"\n', r"servers\.x: url: must not carry credentials"),
        ('[servers.x]\nurl = "https://h/mcp"\nargs = ["a"]\n', r"servers\.x: args: applies only to a server with a"),
        ('[servers.x]\nurl = "https://h/mcp"\nenv = { A = "b" }\n', r"servers\.x: env: applies only"),
        ('[servers.x]\ncommand = "sh"\nheaders_env = { A = "B" }\n', r"servers\.x: headers_env: applies only"),
        ('[servers.x]\nurl = "https://h/mcp"\nheaders_env = { "A B" = "B" }\n', r"'A B' is not an HTTP header"),
        ('[servers.x]\nurl = "https://h/mcp"\nheaders_env = { A = "1B" }\n', r"headers_env\.A: '1B' is not an env"),
        (
            '[servers.x]\nurl = "https://h/mcp"\nheaders_env = { A = 1 }\n',
            r"servers\.x\.headers_env\.A: expected `str`",
        ),
        ('[servers.x]\ncommand = "sh"\nname = "y"\n', r"servers\.x\.name"),
        (
            '[servers.x]\ncommand = "sh"\n[servers.x.overrides.t1]\nside_effect_class = "SAFE"\n',
            r"servers\.x\.overrides\.t1\.side_effect_class: invalid enum value",
        ),
        (
            '[servers.x]\ncommand = "sh"\n[servers.x.overrides.t1]\nrisk_tier = "low"\nnote = 1\n',
            r"servers\.x\.overrides\.t1\.note: unknown field",
        ),
        ('[servers.x]\ncommand = "sh"\noverrides = 3\n', r"servers\.x\.overrides: expected a table"),
        ("servers = 3\n", r"servers: expected a table"),
        ('[server.x]\ncommand = "sh"\n', r"unknown top-level key 'server'"),
        ("[servers.x\n", r"invalid TOML"),
        ('[servers.x]\ncommand = "sh"\ntrust_hints = "yes"\n', r"servers\.x\.trust_hints: expected `bool`"),
        (
            '[servers.x]\ncommand = "sh"\ndefault_side_effect_class = "SAFE"\n',
            r"servers\.x\.default_side_effect_class: invalid enum value",
        ),
        (
            '[servers.x]\ncommand = "sh"\ndefault_risk_tier = "HIGH"\n',
            r"servers\.x\.default_risk_tier: invalid enum value",
        ),
        (
            '[servers.x]\ncommand = "sh"\ntrust_hints = true\ndefault_risk_tier = "low"\n',
            r"servers\.x\.default_risk_tier: has no effect when trust_hints = true",
        ),
    ],
)
def test_invalid_input_names_the_bad_field(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        load_mcp_servers(write(tmp_path, text))


def test_struct_defaults_are_empty_and_untrusted() -> None:
    config = McpServerConfig(name="x", command="/bin/sh")
    assert config.args == [] and config.env == {} and config.pinned_arguments == {} and config.overrides == {}
    assert config.trust_hints is False
    assert (config.default_side_effect_class, config.default_risk_tier) == (
        SideEffectClass.IRREVERSIBLE_WRITE,
        RiskTier.HIGH,
    )


def test_trust_and_the_operators_defaults_are_read(tmp_path: Path) -> None:
    text = (
        '[servers.trusted]\ncommand = "sh"\ntrust_hints = true\n\n'
        '[servers.notes]\ncommand = "sh"\n'
        'default_side_effect_class = "REVERSIBLE_WRITE"\ndefault_risk_tier = "medium"\n'
    )
    servers = load_mcp_servers(write(tmp_path, text))

    assert servers["trusted"].trust_hints is True
    notes = servers["notes"]
    assert notes.trust_hints is False
    assert (notes.default_side_effect_class, notes.default_risk_tier) == (
        SideEffectClass.REVERSIBLE_WRITE,
        RiskTier.MEDIUM,
    )


def test_rate_limits_are_read_per_server_and_per_tool(tmp_path: Path) -> None:
    text = (
        '[servers.git]\ncommand = "sh"\nrate_limit = { calls = 100, period_s = 30 }\n'
        "[servers.git.overrides.git_log]\nrate_limit = { calls = 3, period_s = 1.5 }\n\n"
        '[servers.time]\ncommand = "sh"\n'
    )
    servers = load_mcp_servers(write(tmp_path, text))

    assert servers["git"].rate_limit == RateLimit(calls=100, period_s=30.0)
    assert servers["git"].overrides["git_log"].rate_limit == RateLimit(calls=3, period_s=1.5)
    assert servers["time"].rate_limit == DEFAULT_MCP_RATE_LIMIT == RateLimit(calls=30, period_s=60.0)


SERVER = '[servers.x]\ncommand = "sh"\n'
TOOL = SERVER + "[servers.x.overrides.t1]\n"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (SERVER + "rate_limit = { calls = 0, period_s = 60 }\n", r"servers\.x\.rate_limit\.calls: must be an integer"),
        (SERVER + "rate_limit = { calls = -5, period_s = 60 }\n", r"servers\.x\.rate_limit\.calls: .*got -5"),
        (SERVER + "rate_limit = { calls = 1000001, period_s = 60 }\n", r"servers\.x\.rate_limit\.calls"),
        (SERVER + "rate_limit = { calls = 2.5, period_s = 60 }\n", r"servers\.x\.rate_limit\.calls: expected `int`"),
        (SERVER + "rate_limit = { calls = true, period_s = 60 }\n", r"servers\.x\.rate_limit\.calls: expected `int`"),
        (SERVER + "rate_limit = { calls = 5, period_s = 0 }\n", r"servers\.x\.rate_limit\.period_s: must be"),
        (SERVER + "rate_limit = { calls = 5, period_s = -1.0 }\n", r"servers\.x\.rate_limit\.period_s"),
        (SERVER + "rate_limit = { calls = 5, period_s = nan }\n", r"servers\.x\.rate_limit\.period_s: .*nan"),
        (SERVER + "rate_limit = { calls = 5, period_s = inf }\n", r"servers\.x\.rate_limit\.period_s: .*inf"),
        (SERVER + "rate_limit = { calls = 5, period_s = 4e7 }\n", r"servers\.x\.rate_limit\.period_s: .*at most"),
        (
            SERVER + 'rate_limit = { calls = 5, period_s = "60" }\n',
            r"servers\.x\.rate_limit\.period_s: expected `float`",
        ),
        (SERVER + "rate_limit = { calls = 5 }\n", r"servers\.x\.rate_limit: object missing required field `period_s`"),
        (SERVER + "rate_limit = { calls = 5, period = 60 }\n", r"servers\.x\.rate_limit\.period: unknown field"),
        (SERVER + "rate_limit = 30\n", r"servers\.x\.rate_limit: expected `object`"),
        (TOOL + "rate_limit = { calls = 0, period_s = 60 }\n", r"servers\.x\.overrides\.t1\.rate_limit\.calls"),
        (TOOL + "rate_limit = { calls = 1, period_s = 0 }\n", r"servers\.x\.overrides\.t1\.rate_limit\.period_s"),
        (
            TOOL + "rate_limit = { calls = 1, per = 2 }\n",
            r"servers\.x\.overrides\.t1\.rate_limit(\.per)?: (unknown field|expected `object)",
        ),
        (
            TOOL + 'rate_limit = "10/min"\n',
            r"servers\.x\.overrides\.t1\.rate_limit(\.per)?: (unknown field|expected `object)",
        ),
    ],
)
def test_a_bad_rate_limit_is_refused_naming_the_field(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        load_mcp_servers(write(tmp_path, text))


def test_an_http_upstream_is_read_and_its_header_values_come_from_the_environment(tmp_path: Path) -> None:
    text = '[servers.tickets]\nurl = "https://tickets.example/mcp"\nheaders_env = { Authorization = "TICKETS_AUTH" }\n'
    (config,) = load_mcp_servers(write(tmp_path, text)).values()

    assert (config.url, config.command, config.headers_env) == (
        "https://tickets.example/mcp",
        "",
        {"Authorization": "TICKETS_AUTH"},
    )
    assert header_values(config, {"TICKETS_AUTH": "Bearer t0k3n-value"}) == {"Authorization": "Bearer t0k3n-value"}
    with pytest.raises(ValueError, match="environment variable TICKETS_AUTH .* is not set") as unset:
        header_values(config, {})
    assert "Bearer" not in str(unset.value)


def test_every_problem_of_a_servers_file_is_reported_each_naming_the_file(tmp_path: Path) -> None:
    text = '[servers.a]\ncomand = "x"\n[servers.ok]\ncommand = "sh"\n[servers.b]\nurl = "ftp://h"\n[extra]\n'

    with pytest.raises(ConfigInvalid) as refused:
        load_mcp_servers(write(tmp_path, text))

    assert refused.value.problems == [
        "mcp.toml: unknown top-level key 'extra' (expected only 'servers')",
        'mcp.toml: servers.a.comand: unknown field; did you mean "command"?',
        "mcp.toml: servers.b: url: expected an http:// or https:// URL with a host, got 'ftp://h'",
    ]


def test_parse_servers_raises_every_problem_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        parse_servers({"a": {"comand": "x"}, "Bad": {"command": "sh"}}, tmp_path, "mcp.servers")

    assert [problem.split(":")[0] for problem in refused.value.problems] == ["mcp.servers.a.comand", "mcp.servers.Bad"]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.example/mcp", "https://api.example/mcp"),
        ("https://api.example/mcp?api_key=S3cret", "https://api.example/mcp?api_key=***"),
        ("https://api.example/mcp?a=1&token=S3cret&flag&b=", "https://api.example/mcp?a=***&token=***&***&b="),
        ("https://api.example/mcp?S3cret", "https://api.example/mcp?***"),
        ("https://api.example/mcp?k=S3cret#S3cret", "https://api.example/mcp?k=***#***"),
        ("https://api.example/mcp?k=a=S3cret", "https://api.example/mcp?k=***"),
        ("http://[::1?k=S3cret", "http://[::1?k=***"),
    ],
)
def test_a_url_is_shown_with_its_query_values_masked(url: str, shown: str) -> None:
    assert masked_url(url) == shown


def test_a_refused_url_is_named_with_its_query_values_masked(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as refused:
        load_mcp_servers(write(tmp_path, '[servers.x]\nurl = "ftp://h/mcp?api_key=S3cret"\n'))

    assert "S3cret" not in str(refused.value) and "ftp://h/mcp?api_key=***" in str(refused.value)
