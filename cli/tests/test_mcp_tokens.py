"""``toolgate mcp token``: tokens made, listed and revoked; the file keeps digests only."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from typer.testing import CliRunner

from toolgate.cli.app import app
from toolgate.surface.adapters.tokens import StaticTokens

runner = CliRunner()


def add(file: Path, *more: str) -> str:
    done = runner.invoke(app, ["mcp", "token", "add", "--file", str(file), *more])
    assert done.exit_code == 0, done.output
    return done.stdout.strip().splitlines()[-1]


def test_a_token_is_printed_once_kept_as_a_digest_and_acts_as_its_principal(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    token = add(file, "--principal", "demo-agent", "--label", "laptop", "--scope", "toolgate:tools", "--scope", "x")
    assert token.startswith("tgm_") and token not in file.read_text()
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    found = asyncio.run(StaticTokens(file, None).verify_token(token))
    assert found is not None and found.client_id == "demo-agent" and found.scopes == ["toolgate:tools", "x"]


def test_tokens_are_listed_without_secrets_and_a_revoked_one_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "tokens.toml"
    kept = add(file, "--principal", "a", "--label", "one")
    gone = add(file, "--principal", "b", "--label", "two")
    listed = runner.invoke(app, ["mcp", "token", "list", "--file", str(file)]).stdout
    assert "one\ta\ttoolgate:tools" in listed and "two\tb" in listed and kept not in listed
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


def test_serve_refuses_stdio_without_a_principal_and_says_how() -> None:
    done = runner.invoke(app, ["mcp", "serve", "--stdio", "--nats-url", "nats://127.0.0.1:1"])
    assert done.exit_code == 2 and "--stdio needs --principal" in done.output
