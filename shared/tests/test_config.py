"""effectgate.toml: every kind of bad input is refused naming the file, the key path and what is wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.config.effectgate_file import (
    ChatConfig,
    ConfigInvalid,
    ToolLimits,
    apply_limits,
    load_config,
    load_servers,
)

PYTHON = sys.executable


def write(tmp_path: Path, text: str, name: str = "effectgate.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigInvalid) as refused:
        load_config(write(tmp_path, text))
    return refused.value.problems


def test_a_full_file_loads_with_paths_resolved_against_its_directory(tmp_path: Path) -> None:
    text = f"""
[mcp.servers.git]
command = "{PYTHON}"
args = ["-V"]
trust_hints = true

[tools]
descriptor_dirs = ["tools", "/abs/tools"]

[tools.limits.mcp_git]
timeout_s = 5
rate_limit = {{ calls = 10, period_s = 60 }}

[chat]
platform = "slack"
rooms = {{ operator = "C1" }}
slack_bot_token_file = "secrets/bot"
"""
    config = load_config(write(tmp_path, text))

    assert list(config.mcp.servers) == ["git"] and config.mcp.servers["git"].trust_hints is True
    assert config.descriptor_dirs() == [tmp_path / "tools", Path("/abs/tools")]
    assert config.tools.limits["mcp_git"] == ToolLimits(timeout_s=5.0, rate_limit=RateLimit(calls=10, period_s=60.0))
    assert config.chat_settings() == {
        "platform": "slack",
        "rooms": {"operator": "C1"},
        "slack_bot_token_file": str(tmp_path / "secrets" / "bot"),
    }


def test_an_empty_file_and_no_file_give_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EFFECTGATE_CONFIG", raising=False)
    empty = load_config(write(tmp_path, ""))
    none = load_config(None)

    assert (empty.mcp.servers, empty.descriptor_dirs(), empty.chat) == ({}, None, ChatConfig())
    assert (none.path, none.mcp.servers, none.descriptor_dirs()) == (None, {}, None)


def test_no_path_reads_the_file_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[chat]\nplatform = "matrix"\n')
    monkeypatch.setenv("EFFECTGATE_CONFIG", str(path))

    assert load_config(None).chat.platform == "matrix"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            f'[mcp.servers.git]\ncomand = "{PYTHON}"\n',
            'effectgate.toml: mcp.servers.git.comand: unknown field; did you mean "command"?',
        ),
        ('[chat]\nplatfrom = "slack"\n', 'effectgate.toml: chat.platfrom: unknown field; did you mean "platform"?'),
        ('[tool]\ndescriptor_dirs = ["x"]\n', 'effectgate.toml: tool: unknown field; did you mean "tools"?'),
        (
            "[tools]\ndescriptor_dir = []\n",
            'effectgate.toml: tools.descriptor_dir: unknown field; did you mean "descriptor_dirs"?',
        ),
        ('[mcp.server.git]\ncommand = "x"\n', 'effectgate.toml: mcp.server: unknown field; did you mean "servers"?'),
        ("[mcp.servers.git]\ncommand = 5\n", "effectgate.toml: mcp.servers.git.command: expected `str`, got `int`"),
        (
            '[tools]\ndescriptor_dirs = "tools"\n',
            "effectgate.toml: tools.descriptor_dirs: expected `array | null`, got `str`",
        ),
        ('[chat]\nplatform = "irc"\n', "effectgate.toml: chat.platform: invalid enum value 'irc'"),
        ('[chat]\nslack_port = "80"\n', "effectgate.toml: chat.slack_port: expected `int | null`, got `str`"),
        ('[mcp.servers.Git]\ncommand = "sh"\n', "effectgate.toml: mcp.servers.Git: server name must match"),
        ("[mcp.servers.git]\nargs = []\n", "effectgate.toml: mcp.servers.git: set exactly one of command"),
        (
            '[mcp.servers.git]\ncommand = "no-such-command-xyz"\n',
            "effectgate.toml: mcp.servers.git.command: command 'no-such-command-xyz' is not an executable file",
        ),
        ("[tools.limits.Bad]\ntimeout_s = 1\n", "effectgate.toml: tools.limits.Bad: tool name must match"),
        (
            "[tools.limits.x]\ntimeout_s = 0\n",
            "effectgate.toml: tools.limits.x.timeout_s: must be a number of seconds above 0",
        ),
        (
            "[tools.limits.x]\ntimeout_s = nan\n",
            "effectgate.toml: tools.limits.x.timeout_s: must be a number of seconds",
        ),
        (
            "[tools.limits.x]\nrate_limit = { calls = 0, period_s = 1 }\n",
            "effectgate.toml: tools.limits.x.rate_limit.calls: must be an integer from 1",
        ),
        ("[tools.limits.x]\nretries = 3\n", "effectgate.toml: tools.limits.x.retries: unknown field"),
        ("mcp = 3\n", "effectgate.toml: mcp: expected a table"),
        ("[tools]\nlimits = 3\n", "effectgate.toml: tools: expected a table whose limits is a table"),
        (
            "[tools.limits.x]\ntimeout = 3\n",
            'effectgate.toml: tools.limits.x.timeout: unknown field; did you mean "timeout_s"?',
        ),
        ("[mcp]\nservers = 3\n", "effectgate.toml: mcp.servers: expected a table of server tables"),
        ("[mcp.servers\n", "effectgate.toml: invalid TOML"),
    ],
)
def test_bad_input_is_refused_naming_the_key(tmp_path: Path, text: str, expected: str) -> None:
    found = problems(tmp_path, text)

    assert len(found) == 1 and found[0].startswith(expected), found


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    text = (
        '[mcp.servers.a]\ncomand = "x"\n[mcp.servers.b]\nargs = []\n'
        '[tools.limits.x]\ntimeout_s = -1\n[chat]\nroom = "x"\n'
    )

    found = problems(tmp_path, text)

    assert [problem.split(":")[1].strip() for problem in found] == [
        "mcp.servers.a.comand",
        "mcp.servers.b",
        "tools.limits.x.timeout_s",
        "chat.room",
    ]


def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match=r"missing\.toml: cannot be read"):
        load_config(tmp_path / "missing.toml")


def test_load_servers_reads_either_an_mcp_servers_file_or_a_effectgate_toml(tmp_path: Path) -> None:
    old = write(tmp_path, f'[servers.a]\ncommand = "{PYTHON}"\n', "servers.toml")
    new = write(tmp_path, f'[mcp.servers.a]\ncommand = "{PYTHON}"\n')

    assert load_servers(old) == load_servers(new)
    assert list(load_servers(new)) == ["a"]


def test_limits_replace_the_descriptors_own_and_nothing_else() -> None:
    spec = OperationSpec(
        input_schema={}, output_schema={}, side_effect_class=SideEffectClass.READ_ONLY, risk_tier=RiskTier.LOW
    )
    descriptor = ToolDescriptor(name="t", version="1.0.0", adapter="x", operations={"op": spec})
    limits = {"t": ToolLimits(timeout_s=3.0)}

    limited = apply_limits(descriptor, limits)

    assert (limited.timeout_s, limited.rate_limit, limited.operations) == (3.0, descriptor.rate_limit, {"op": spec})
    assert apply_limits(descriptor, {"other": ToolLimits(timeout_s=3.0)}) is descriptor
    assert apply_limits(descriptor, {"t": ToolLimits()}) is descriptor


@pytest.mark.parametrize("relative", [True, False])
def test_a_missing_file_is_named_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    path = Path("effectgate.toml") if relative else tmp_path / "effectgate.toml"

    with pytest.raises(ConfigInvalid) as refused:
        load_config(path)

    (problem,) = refused.value.problems
    assert problem.startswith(f"{path}: cannot be read: ")
    assert (f"(looked for {tmp_path / 'effectgate.toml'})" in problem) is relative
