"""Settings come from the constructor, then the environment, then effectgate.toml, then the defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

from effectgate.chatops.settings import ChatopsSettings
from effectgate.executor.settings import ExecutorSettings
from effectgate.registry.settings import RegistrySettings
from effectgate.shared.config.effectgate_file import ChatConfig, ConfigInvalid
from effectgate.shared.config.settings import MCP_SERVERS_ENV, deprecated_mcp_env, named_mcp_servers_file

CONFIG = f"""
[mcp.servers.a]
command = "{sys.executable}"

[tools]
descriptor_dirs = ["from-file"]

[chat]
platform = "slack"
default_room = "C-file"
"""


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No effectgate setting from the outer environment."""
    for name in (
        "EFFECTGATE_CONFIG",
        "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR",
        "EFFECTGATE_CHATOPS_PLATFORM",
        *MCP_SERVERS_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def config(tmp_path: Path, env: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effectgate.toml"
    path.write_text(CONFIG, encoding="utf-8")
    env.setenv("EFFECTGATE_CONFIG", str(path))
    return path


def test_without_a_file_the_defaults_hold(env: pytest.MonkeyPatch) -> None:
    registry, chat = RegistrySettings(), ChatopsSettings()

    assert (registry.descriptors_dir, registry.mcp_servers_file) == ([Path("deploy/tools")], None)
    assert (chat.platform, chat.default_room) == ("matrix", "")


def test_the_file_sets_what_the_environment_does_not(config: Path) -> None:
    registry, executor, chat = RegistrySettings(), ExecutorSettings(), ChatopsSettings()

    assert registry.descriptors_dir == [config.parent / "from-file"]
    assert registry.mcp_servers_file == executor.mcp_servers_file == config
    assert (chat.platform, chat.default_room) == ("slack", "C-file")


def test_the_environment_overrides_the_file(config: Path, env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("EFFECTGATE_REGISTRY_DESCRIPTORS_DIR", "/one:/two")
    env.setenv("EFFECTGATE_MCP_SERVERS_FILE", "/elsewhere/servers.toml")
    env.setenv("EFFECTGATE_CHATOPS_PLATFORM", "matrix")

    registry, executor, chat = RegistrySettings(), ExecutorSettings(), ChatopsSettings()

    assert registry.descriptors_dir == [Path("/one"), Path("/two")]
    assert registry.mcp_servers_file == executor.mcp_servers_file == Path("/elsewhere/servers.toml")
    assert (chat.platform, chat.default_room) == ("matrix", "C-file")


def test_the_constructor_overrides_the_environment(config: Path, env: pytest.MonkeyPatch) -> None:
    env.setenv("EFFECTGATE_REGISTRY_DESCRIPTORS_DIR", "/env")

    settings = RegistrySettings(descriptors_dir=None, mcp_servers_file=Path("/given.toml"))

    assert (settings.descriptors_dir, settings.mcp_servers_file) == ([], Path("/given.toml"))


@pytest.mark.parametrize("variable", MCP_SERVERS_ENV)
def test_one_mcp_servers_variable_reaches_both_the_registry_and_the_executor(
    env: pytest.MonkeyPatch, variable: str
) -> None:
    env.setenv(variable, "/srv/servers.toml")

    assert RegistrySettings().mcp_servers_file == ExecutorSettings().mcp_servers_file == Path("/srv/servers.toml")
    warning = deprecated_mcp_env()
    assert (warning is None) == (variable == "EFFECTGATE_MCP_SERVERS_FILE")
    assert warning is None or variable in warning and "EFFECTGATE_MCP_SERVERS_FILE" in warning


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": "/e.toml", "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": "/r.toml"},
        {"EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": "/e.toml", "EFFECTGATE_MCP_SERVERS_FILE": "/m.toml"},
        {"EFFECTGATE_MCP_SERVERS_FILE": "", "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": "/r.toml"},
    ],
)
def test_config_check_names_the_servers_file_the_services_read(env: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for variable, value in values.items():
        env.setenv(variable, value)

    named = named_mcp_servers_file()

    read = None if named is None else Path(named[1])
    assert RegistrySettings().mcp_servers_file == ExecutorSettings().mcp_servers_file == read


def test_an_invalid_file_stops_every_service_naming_the_problem(config: Path) -> None:
    config.write_text('[chat]\nplatfrom = "slack"\n', encoding="utf-8")

    for settings in (RegistrySettings, ExecutorSettings, ChatopsSettings):
        with pytest.raises(
            ConfigInvalid, match=r'effectgate\.toml: chat\.platfrom: unknown field; did you mean "platform"'
        ):
            settings()


def test_every_chat_key_is_a_chatops_setting() -> None:
    keys = {field.name for field in msgspec.structs.fields(ChatConfig)}

    assert keys <= set(ChatopsSettings.model_fields), keys - set(ChatopsSettings.model_fields)


def test_a_file_given_to_the_constructor_is_read(tmp_path: Path, env: pytest.MonkeyPatch) -> None:
    path = tmp_path / "given.toml"
    path.write_text('[tools]\ndescriptor_dirs = ["given"]\n[chat]\nplatform = "slack"\n', encoding="utf-8")

    registry, chat = RegistrySettings(config_file=path), ChatopsSettings(config_file=path)

    assert (registry.config_file, registry.descriptors_dir) == (path, [tmp_path / "given"])
    assert (chat.config_file, chat.platform) == (path, "slack")
