"""``effectgate mcp token``: tokens made, listed and revoked; the file keeps digests only.

Run from a working directory that is not the repository's: the principal directory is the
one ``up`` gives the policy service (``EFFECTGATE_POLICY_PRINCIPALS_FILE``, else the deploy
directory's), never one relative to where the command runs.
"""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.surface.adapters.tokens import StaticTokens

runner = CliRunner()

DIRECTORY = """
[principals.a]
autonomy = 1
roles = ["agent"]

[principals.b]
autonomy = 1
roles = ["agent"]

[principals.demo-agent]
autonomy = 1
roles = ["agent"]
"""


@pytest.fixture(autouse=True)
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, and a principal directory named as ``up`` is given one."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    (tmp_path / "principals.toml").write_text(DIRECTORY)
    monkeypatch.setenv("EFFECTGATE_POLICY_PRINCIPALS_FILE", str(tmp_path / "principals.toml"))
    monkeypatch.delenv("EFFECTGATE_DEPLOY_DIR", raising=False)
    return tmp_path


def add(file: Path, *more: str) -> str:
    done = runner.invoke(app, ["mcp", "token", "add", "--file", str(file), *more])
    assert done.exit_code == 0, done.output
    return done.stdout.strip().splitlines()[-1]


def test_a_token_is_printed_once_kept_as_a_digest_and_acts_as_its_principal(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    token = add(file, "--principal", "demo-agent", "--label", "laptop", "--scope", "effectgate:tools", "--scope", "x")
    assert token.startswith("tgm_") and token not in file.read_text()
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    found = asyncio.run(StaticTokens(file, None).verify_token(token))
    assert found is not None and found.client_id == "demo-agent" and found.scopes == ["effectgate:tools", "x"]


def test_tokens_are_listed_without_secrets_and_a_revoked_one_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    kept = add(file, "--principal", "a", "--label", "one")
    gone = add(file, "--principal", "b", "--label", "two")
    listed = runner.invoke(app, ["mcp", "token", "list", "--file", str(file)]).stdout
    assert "one\ta\teffectgate:tools" in listed and "two\tb" in listed and kept not in listed
    assert runner.invoke(app, ["mcp", "token", "revoke", "--label", "two", "--file", str(file)]).exit_code == 0
    tokens = StaticTokens(file, None)
    assert asyncio.run(tokens.verify_token(gone)) is None and asyncio.run(tokens.verify_token(kept)) is not None


def test_bad_names_a_taken_label_and_bad_scopes_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    add(file, "--principal", "a", "--label", "one")
    for args in (
        ["--principal", "a b", "--label", "x"],
        ["--principal", "a", "--label", "one"],
        ["--principal", "a", "--label", "y", "--scope", 'bad"scope'],
        ["--principal", "a", "--label", "z", "--scope", "with space"],
    ):
        done = runner.invoke(app, ["mcp", "token", "add", "--file", str(file), *args])
        assert done.exit_code == 2 and "refused" in done.output
    assert runner.invoke(app, ["mcp", "token", "revoke", "--label", "nope", "--file", str(file)]).exit_code == 2


@pytest.mark.parametrize(
    ("principal", "hint"),
    [
        ("nobody-here", ""),
        ("demo-agnet", "did you mean 'demo-agent'?"),
        ("c", ""),
        ("demo_agent", "did you mean 'demo-agent'?"),
    ],
)
def test_a_principal_the_directory_does_not_list_is_refused_naming_it(
    tmp_path: Path, elsewhere: Path, principal: str, hint: str
) -> None:
    file = tmp_path / "tokens.toml"

    add = ["mcp", "token", "add", "--file", str(file), "--principal", principal, "--label", "x"]
    done = runner.invoke(app, add, env={"COLUMNS": "400"})  # the path is never cut, however long tmp_path is

    said = " ".join(done.output.split())
    assert done.exit_code == 2 and f"principal '{principal}' is not in the principal directory" in said, said
    assert str(elsewhere / "principals.toml") in said and hint in said
    assert not file.exists()


def test_the_principals_option_names_another_directory_and_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text('[principals.zed]\nautonomy = 0\nroles = ["agent"]\n')
    file = tmp_path / "tokens.toml"
    base = ["mcp", "token", "add", "--file", str(file), "--label"]

    assert runner.invoke(app, [*base, "one", "--principal", "zed", "--principals", str(other)]).exit_code == 0
    assert runner.invoke(app, [*base, "two", "--principal", "a", "--principals", str(other)]).exit_code == 2
    missing = runner.invoke(app, [*base, "three", "--principal", "a", "--principals", str(tmp_path / "none.toml")])
    assert missing.exit_code == 2 and "cannot check principal 'a'" in " ".join(missing.output.split())


def test_without_a_setting_the_deploy_directorys_principals_are_the_ones(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EFFECTGATE_POLICY_PRINCIPALS_FILE")
    file = tmp_path / "tokens.toml"

    assert (
        runner.invoke(
            app, ["mcp", "token", "add", "--file", str(file), "--principal", "demo-agent", "--label", "x"]
        ).exit_code
        == 0
    )
    assert (
        runner.invoke(app, ["mcp", "token", "add", "--file", str(file), "--principal", "a", "--label", "y"]).exit_code
        == 2
    )


def test_serve_refuses_stdio_without_a_principal_and_says_how() -> None:
    done = runner.invoke(app, ["mcp", "serve", "--stdio", "--nats-url", "nats://127.0.0.1:1"])
    assert done.exit_code == 2 and "--stdio needs --principal" in done.output
