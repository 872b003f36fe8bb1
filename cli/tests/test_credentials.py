"""Credentials files: written private, read strictly, kept across starts; the CLI picks its identity from them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from effectgate.cli.client.identity import identity
from effectgate.cli.stack.credentials import BusCredentials, kept_passwords
from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus.nats_credentials import CredentialsInvalid, load_credentials
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.shared.config.settings import NATS_IDENTITY_ENV

DIRECTORY = PrincipalDirectory.from_toml(
    "[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = []\n[approvers.bob]\nroles = []\n"
)
CLIENTS = {"agent-demo-agent", "approver-alice", "approver-bob", "auditor", "mcp-surface", "operator"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    credentials, _ = BusCredentials.generate(DIRECTORY)
    credentials.write_files(tmp_path / "state" / "credentials")
    return tmp_path / "state" / "credentials"


def test_one_private_file_per_client_user_in_a_private_directory(folder: Path) -> None:
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {path.stem for path in folder.iterdir()} == CLIENTS
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert load_credentials(path) == {
            "user": path.stem,
            "password": load_credentials(path)["password"],
            "inbox_prefix": f"_INBOX_{path.stem}",
        }


def test_passwords_are_kept_across_starts_and_files_of_removed_users_go(folder: Path) -> None:
    kept = kept_passwords(folder)
    smaller = PrincipalDirectory.from_toml("[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = []\n")
    again, config = BusCredentials.generate(smaller, keep=kept)
    again.write_files(folder)
    assert {path.stem for path in folder.iterdir()} == CLIENTS - {"approver-bob"}
    assert kept_passwords(folder) == {user: kept[user] for user in CLIENTS - {"approver-bob"}}
    assert f'"{kept["operator"]}"' in config


def test_an_unusable_kept_password_is_replaced(folder: Path) -> None:
    again, _ = BusCredentials.generate(DIRECTORY, keep={"operator": "short", "approver-alice": '"; deny everything'})
    assert again.passwords["operator"] != "short" and len(again.passwords["operator"]) > 16
    assert '"' not in again.passwords["approver-alice"]


@pytest.mark.parametrize(
    ("content", "mode", "names"),
    [
        (None, 0o600, "No such file"),
        (b'{"user": "operator", "password": "p", "inbox_prefix": "_INBOX_operator"}', 0o644, "mode 0644"),
        (b'{"user": "operator", "password": "p", "inbox_prefix": "_INBOX_operator"}', 0o640, "mode 0640"),
        (b"not json", 0o600, "malformed"),
        (b'{"user": "operator", "password": "p"}', 0o600, "missing required field `inbox_prefix`"),
        (b'{"user": "operator", "password": "p", "inbox_prefix": "x", "token": "t"}', 0o600, "unknown field `token`"),
        (b'{"user": "operator", "password": 7, "inbox_prefix": "x"}', 0o600, "`$.password`"),
        (b'["operator"]', 0o600, "Expected `object`"),
    ],
    ids=["missing", "world-readable", "group-readable", "not-json", "no-inbox", "unknown-field", "wrong-type", "array"],
)
def test_a_credentials_file_that_cannot_be_trusted_is_refused_naming_why(
    tmp_path: Path, content: bytes | None, mode: int, names: str
) -> None:
    path = tmp_path / "operator.json"
    if content is not None:
        path.write_bytes(content)
        path.chmod(mode)
    with pytest.raises(CredentialsInvalid, match="credentials file") as refused:
        load_credentials(path)
    assert names in str(refused.value)


def test_the_cli_acts_as_the_operator_or_the_named_approver(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EFFECTGATE_CREDENTIALS", raising=False)
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(folder.parent))
    assert identity().user == "operator"
    assert identity("alice").user == "approver-alice"
    assert identity("alice").options["inbox_prefix"] == "_INBOX_approver-alice"
    with pytest.raises(CredentialsInvalid, match="no credentials for approver 'carol'"):
        identity("carol")


@pytest.mark.parametrize("approver", ["../operator", "a.b", "*", "", "al ice"])
def test_an_approver_name_that_is_no_token_is_refused_before_any_file_is_read(
    folder: Path, monkeypatch: pytest.MonkeyPatch, approver: str
) -> None:
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(folder.parent))
    with pytest.raises(ValueError, match="must match"):
        identity(approver)


def test_a_held_credentials_file_is_the_identity_for_every_command(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(folder.parent))
    monkeypatch.setenv("EFFECTGATE_CREDENTIALS", str(folder / "approver-bob.json"))
    assert identity().user == identity("alice").user == "approver-bob"


def test_without_a_credentials_directory_the_cli_connects_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EFFECTGATE_CREDENTIALS", raising=False)
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("EFFECTGATE_INBOX_PREFIX", "_INBOX_approver-alice")
    assert identity("alice").user is None
    assert identity("alice").options == {"inbox_prefix": "_INBOX_approver-alice"}


def test_up_keeps_the_files_a_person_exported_over_the_deploy_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from effectgate.cli.stack.launch import chosen_config, config_env

    monkeypatch.setenv("EFFECTGATE_CHATOPS_PRINCIPALS_FILE", "/srv/mine.toml")
    monkeypatch.delenv("EFFECTGATE_POLICY_PRINCIPALS_FILE", raising=False)
    chosen = chosen_config({"EFFECTGATE_POLICY_POLICY_FILE": "/tests/policy.cedar"})
    assert chosen["EFFECTGATE_CHATOPS_PRINCIPALS_FILE"] == "/srv/mine.toml"  # exported: kept
    assert chosen["EFFECTGATE_POLICY_POLICY_FILE"] == "/tests/policy.cedar"  # given by the caller: wins
    assert chosen["EFFECTGATE_POLICY_PRINCIPALS_FILE"] == config_env()["EFFECTGATE_POLICY_PRINCIPALS_FILE"]


def test_up_gives_a_service_its_credentials_as_options_and_a_url_without_them(tmp_path: Path) -> None:
    credentials, _ = BusCredentials.generate(DIRECTORY)
    secured = Stack(tmp_path, "nats://127.0.0.1:4222", "redis://127.0.0.1:6379/0", {}, credentials)
    env = secured.nats_env("policy")
    assert env["NATS_URL"] == "nats://127.0.0.1:4222"
    assert (env["EFFECTGATE_NATS_USER"], env["EFFECTGATE_NATS_PASSWORD"]) == ("policy", credentials.passwords["policy"])
    assert all(
        env[name] == ""
        for name in NATS_IDENTITY_ENV
        if name not in ("EFFECTGATE_NATS_USER", "EFFECTGATE_NATS_PASSWORD")
    )
    open_env = Stack(tmp_path, "nats://127.0.0.1:4222", "redis://127.0.0.1:6379/0", {}).nats_env("policy")
    assert open_env == {"NATS_URL": "nats://127.0.0.1:4222", **dict.fromkeys(NATS_IDENTITY_ENV, "")}
