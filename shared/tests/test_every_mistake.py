"""Every mistake of a configuration file is reported at its key path, a mistyped key with the key meant.

The variants are generated: each field of each table of ``effectgate.toml`` and of an MCP servers
file, mistyped (its last letter doubled), all in one file, must each give their own line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.shared.config.effectgate_file import ChatConfig, ToolLimits, ToolsConfig, load_config
from effectgate.shared.config.toml_file import ConfigInvalid
from effectgate.shared.mcp.loading import load_mcp_servers
from effectgate.shared.mcp.servers import McpServerConfig, Override

PYTHON = sys.executable

EFFECTGATE_TABLES: list[tuple[str, type[msgspec.Struct]]] = [
    ("mcp.servers.git", McpServerConfig),
    ("mcp.servers.git.overrides.git_log", Override),
    ("mcp.servers.git.rate_limit", RateLimit),
    ("tools", ToolsConfig),
    ("tools.limits.mcp_git", ToolLimits),
    ("tools.limits.mcp_git.rate_limit", RateLimit),
    ("chat", ChatConfig),
]
SERVERS_TABLES = [(where.replace("mcp.servers", "servers"), kind) for where, kind in EFFECTGATE_TABLES[:3]]
SET_BY_THE_LOADER = {"name"}


def mistyped(kind: type[msgspec.Struct]) -> dict[str, str]:
    """Each field a table may set, to its mistyped spelling."""
    names = [field.encode_name for field in msgspec.structs.fields(kind) if field.encode_name not in SET_BY_THE_LOADER]
    return {name: name + name[-1] for name in names}


def toml(tables: list[tuple[str, type[msgspec.Struct]]]) -> str:
    return "".join(
        f"[{where}]\n" + "".join(f"{typo} = 1\n" for typo in mistyped(kind).values()) for where, kind in tables
    )


def expected(file: str, tables: list[tuple[str, type[msgspec.Struct]]]) -> list[str]:
    return [
        f'{file}: {where}.{typo}: unknown field; did you mean "{name}"?'
        for where, kind in tables
        for name, typo in mistyped(kind).items()
    ]


def refused(load: object, path: Path) -> list[str]:
    with pytest.raises(ConfigInvalid) as invalid:
        load(path)  # type: ignore[operator]
    return invalid.value.problems


def test_every_mistyped_key_of_a_effectgate_toml_is_reported_with_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text(toml(EFFECTGATE_TABLES))

    found = refused(load_config, path)

    assert sorted(found) == sorted(expected("effectgate.toml", EFFECTGATE_TABLES))
    assert len(found) > 40


def test_every_mistyped_key_of_an_mcp_servers_file_is_reported_with_the_key_meant(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text(toml(SERVERS_TABLES))

    assert sorted(refused(load_mcp_servers, path)) == sorted(expected("mcp.toml", SERVERS_TABLES))


def test_mistakes_of_every_kind_in_one_table_are_each_reported(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text(
        f'[mcp.servers.git]\ncommand = "{PYTHON}"\ncomand = "x"\nargs = [1, "ok", 2]\ntrust_hints = "yes"\n'
        'rate_limit = { calls = "ten", period = 60 }\n'
        '[mcp.servers.git.overrides.git_log]\nside_effect = "READ_ONLY"\nrisk_tier = "HIGH"\n'
    )

    assert refused(load_config, path) == [
        'effectgate.toml: mcp.servers.git.comand: unknown field; did you mean "command"?',
        "effectgate.toml: mcp.servers.git.args[0]: expected `str`, got `int`",
        "effectgate.toml: mcp.servers.git.args[2]: expected `str`, got `int`",
        "effectgate.toml: mcp.servers.git.trust_hints: expected `bool`, got `str`",
        "effectgate.toml: mcp.servers.git.rate_limit.calls: expected `int`, got `str`",
        'effectgate.toml: mcp.servers.git.rate_limit.period: unknown field; did you mean "period_s"?',
        "effectgate.toml: mcp.servers.git.overrides.git_log.side_effect: unknown field; "
        'did you mean "side_effect_class"?',
        "effectgate.toml: mcp.servers.git.overrides.git_log.risk_tier: invalid enum value 'HIGH'",
    ]


def test_a_bad_name_does_not_hide_the_mistakes_of_its_table(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text('[mcp.servers.Git]\ncomand = "x"\n[tools.limits.Bad]\ntimeout = 1\n')

    assert refused(load_config, path) == [
        "effectgate.toml: mcp.servers.Git: server name must match ^[a-z][a-z0-9_]{0,30}\\Z",
        'effectgate.toml: mcp.servers.Git.comand: unknown field; did you mean "command"?',
        "effectgate.toml: tools.limits.Bad: tool name must match ^[a-z][a-z0-9_-]{0,62}\\Z",
        'effectgate.toml: tools.limits.Bad.timeout: unknown field; did you mean "timeout_s"?',
    ]


def test_a_required_field_missing_is_named_unless_a_mistyped_key_was_meant_for_it(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text(
        f'[servers.a]\ncommand = "{PYTHON}"\nrate_limit = {{ calls = 5 }}\n'
        f'[servers.b]\ncommand = "{PYTHON}"\nrate_limit = {{ calls = 5, period = 1 }}\n'
    )

    assert refused(load_mcp_servers, path) == [
        "mcp.toml: servers.a.rate_limit: object missing required field `period_s`",
        'mcp.toml: servers.b.rate_limit.period: unknown field; did you mean "period_s"?',
    ]


def test_a_mistyped_top_level_key_is_named_with_the_key_meant(tmp_path: Path) -> None:
    servers, config = tmp_path / "mcp.toml", tmp_path / "effectgate.toml"
    servers.write_text('[server.x]\ncommand = "sh"\n')
    config.write_text("[tool]\n[chats]\n")

    assert refused(load_mcp_servers, servers) == [
        "mcp.toml: unknown top-level key 'server' (expected only 'servers'); did you mean \"servers\"?"
    ]
    assert refused(load_config, config) == [
        'effectgate.toml: tool: unknown field; did you mean "tools"? (tables: mcp, tools, chat, bus, workers)',
        'effectgate.toml: chats: unknown field; did you mean "chat"? (tables: mcp, tools, chat, bus, workers)',
    ]
