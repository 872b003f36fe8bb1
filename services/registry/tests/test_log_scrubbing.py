"""The registry's log never shows a value configured for an MCP server (its env, its headers)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from effectgate.registry.app import create_app
from effectgate.registry.settings import RegistrySettings

SECRET = "FloodSecretXYZ-4411"


@pytest.fixture
def root_output() -> Iterator[io.StringIO]:
    """A root handler (as the entry point configures one) whose filters are removed afterwards."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield out
    finally:
        root.removeHandler(handler)


def test_a_configured_env_value_is_scrubbed_from_every_registry_record(
    tmp_path: Path, root_output: io.StringIO
) -> None:
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[servers.floody]\ncommand = "/bin/true"\nenv = {{ TOKEN = "{SECRET}" }}\n')
    (tmp_path / "keys").mkdir()
    create_app(RegistrySettings(descriptors_dir=None, mcp_servers_file=servers, keys_dir=tmp_path / "keys"))

    logging.getLogger("effectgate.registry").error("MCP server %r stderr: it printed %s", "floody", SECRET)

    written = root_output.getvalue()
    assert SECRET not in written and "it printed [redacted:configured sha256:" in written
