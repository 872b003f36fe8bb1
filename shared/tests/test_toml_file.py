"""Configuration files are read within bounds: what is no regular file, too large, not UTF-8 or
nested too deeply is refused with one line naming the file, by both loaders and the services' settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from effectgate.shared.config.effectgate_file import ConfigInvalid, load_config
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.config.toml_file import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, read_toml
from effectgate.shared.mcp.loading import load_mcp_servers

LOADERS: list[Callable[[Path], Any]] = [load_config, load_mcp_servers, read_toml]


def refusal(load: Callable[[Path], Any], path: Path) -> str:
    with pytest.raises(ConfigInvalid) as refused:
        load(path)
    (problem,) = refused.value.problems
    return problem


def nested(levels: int) -> str:
    """A document whose value ``a`` nests arrays so that the document is ``levels`` deep."""
    return "a = " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("load", LOADERS)
def test_a_device_is_refused_without_reading_it(load: Callable[[Path], Any]) -> None:
    assert refusal(load, Path("/dev/zero")) == "/dev/zero: not a regular file (a character device); name a TOML file"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("load", LOADERS)
def test_a_fifo_without_a_writer_is_refused_without_waiting(load: Callable[[Path], Any], tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)

    assert refusal(load, fifo) == f"{fifo}: not a regular file (a FIFO); name a TOML file"


@pytest.mark.parametrize("load", LOADERS)
def test_a_directory_is_refused_naming_it(load: Callable[[Path], Any], tmp_path: Path) -> None:
    assert refusal(load, tmp_path) == f"{tmp_path}: not a regular file (a directory); name a TOML file"


@pytest.mark.timeout(10)
@pytest.mark.parametrize("load", LOADERS)
def test_a_file_over_the_limit_is_refused_before_it_is_read(load: Callable[[Path], Any], tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    with huge.open("wb") as file:
        file.truncate(64 * 1024**3)  # sparse: 64 GiB that would take minutes to read

    assert refusal(load, huge) == f"{huge}: larger than 1048576 bytes (1 MiB), the limit for a configuration file"


def test_a_file_at_the_limit_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    at_limit = tmp_path / "at.toml"
    at_limit.write_bytes(b"#" * (MAX_CONFIG_BYTES - 1) + b"\n")
    over = tmp_path / "over.toml"
    over.write_bytes(b"#" * MAX_CONFIG_BYTES + b"\n")

    assert load_config(at_limit).path == at_limit.resolve() and load_mcp_servers(at_limit) == {}
    assert "larger than 1048576 bytes" in refusal(load_config, over)


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("levels", [MAX_CONFIG_DEPTH + 1, 1000, 100_000])
def test_nesting_deeper_than_the_limit_is_refused_naming_the_file(
    load: Callable[[Path], Any], tmp_path: Path, levels: int
) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(nested(levels))

    assert refusal(load, path) == "deep.toml: tables or arrays nested more than 64 levels deep"


def test_deep_dotted_keys_count_as_nesting(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(".".join(["k"] * 5000) + " = 1\n")

    assert refusal(read_toml, path) == "deep.toml: tables or arrays nested more than 64 levels deep"


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(nested(MAX_CONFIG_DEPTH))

    assert "a" in read_toml(path)


@pytest.mark.parametrize("load", LOADERS)
def test_text_that_is_not_utf8_is_refused_naming_the_file(load: Callable[[Path], Any], tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('a = "café"\n'.encode("latin-1"))

    assert refusal(load, path).startswith("latin1.toml: invalid TOML: 'utf-8' codec can't decode byte 0xe9")


def test_a_service_refuses_a_deep_config_file_as_invalid(tmp_path: Path) -> None:
    path = tmp_path / "effectgate.toml"
    path.write_text(nested(1000))

    with pytest.raises(ConfigInvalid, match="effectgate.toml: tables or arrays nested more than 64 levels deep"):
        ServiceSettings(config_file=path)
