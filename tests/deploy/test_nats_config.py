"""deploy/nats/nats.conf is the generator's output, and the generator derives every right.

The committed file is what ``effectgate nats-config --placeholders`` prints for
``deploy/policy/principals.toml``: editing one without regenerating fails here. What the
rights allow and refuse on a running server is tests/deploy/test_nats_permissions.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import nats
import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.stack.credentials import BusCredentials, env_lines
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.nats_permissions import (
    ADMIN,
    AUDITOR,
    MCP_SURFACE,
    OPERATOR,
    SERVICES,
    agent_user,
    approver_user,
    nats_users,
)
from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory, load_directory
from effectgate.devstack.servers import nats_server
from effectgate.shared.config.nats_server import (
    SAFE_PASSWORD,
    generate_passwords,
    literal,
    password_variable,
    placeholders,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy" / "nats" / "nats.conf"
PRINCIPALS = ROOT / "deploy" / "policy" / "principals.toml"
SAME_NAME = PrincipalDirectory.from_toml("[principals.selfie]\nautonomy = 1\n[approvers.selfie]\nroles = []\n")


def test_committed_config_is_the_generators_output() -> None:
    printed = CliRunner().invoke(app, ["nats-config", "--principals", str(PRINCIPALS), "--placeholders"])
    assert printed.exit_code == 0, printed.output
    assert CONFIG.read_text() == printed.stdout, (
        "deploy/nats/nats.conf differs from the generator: run "
        "`effectgate nats-config --principals deploy/policy/principals.toml --placeholders > deploy/nats/nats.conf`, "
        "then copy it to deploy/kubernetes/nats/nats.conf"
    )


def test_config_leaves_addresses_and_storage_to_the_command_line() -> None:
    text = re.sub(r"#.*", "", CONFIG.read_text())
    assert not re.search(r"^\s*(listen|host|port|http|http_port|store_dir)\s*[:=]", text, re.M)


def test_committed_config_has_a_user_per_service_agent_and_approver_the_operator_and_no_admin() -> None:
    directory = load_directory(PRINCIPALS)
    users = set(re.findall(r'\{ user: "([^"]+)"', CONFIG.read_text()))
    expected = {*SERVICES, OPERATOR, MCP_SURFACE, AUDITOR, *map(agent_user, directory.principals)}
    expected |= set(map(approver_user, directory.approvers))
    assert users == expected


@pytest.mark.connected
async def test_committed_config_runs_with_passwords_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every placeholder is read at start; generated passwords survive nats-server's ``$VAR`` parsing."""
    lines = env_lines(load_directory(PRINCIPALS)).splitlines()
    passwords = dict(line.split("=", 1) for line in lines)
    for variable, password in passwords.items():
        monkeypatch.setenv(variable, password)
    with nats_server(tmp_path, config=CONFIG) as server:
        for user in nats_users(load_directory(PRINCIPALS)):
            nc = await nats.connect(server.url, user=user.name, password=passwords[password_variable(user.name)])
            await nc.close()


@pytest.mark.connected
def test_a_missing_password_variable_stops_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in re.findall(r"\$(NATS_[A-Z0-9_]+_PASSWORD)", CONFIG.read_text()):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(RuntimeError, match="server exited"), nats_server(tmp_path, config=CONFIG):
        pass


def test_an_agent_and_an_approver_of_one_name_are_two_users() -> None:
    users = {user.name: user for user in nats_users(SAME_NAME)}
    agent, approver = users[agent_user("selfie")], users[approver_user("selfie")]
    assert agent.inbox_prefix != approver.inbox_prefix
    assert catalog.Subjects.request("selfie") in {rule.subject for rule in agent.publish}
    assert catalog.Subjects.request("selfie") not in {rule.subject for rule in approver.publish}
    assert catalog.Rpc.approvals_decide("selfie") not in {rule.subject for rule in agent.publish}
    assert catalog.Rpc.approvals_withdraw("selfie") in {rule.subject for rule in agent.publish}
    assert catalog.Rpc.approvals_withdraw("selfie") not in {rule.subject for rule in approver.publish}


def test_admin_exists_only_when_asked_for() -> None:
    assert ADMIN not in {user.name for user in nats_users(SAME_NAME)}
    (admin,) = [user for user in nats_users(SAME_NAME, admin=True) if user.name == ADMIN]
    assert [rule.subject for rule in admin.publish] == [">"] == [rule.subject for rule in admin.subscribe]


def test_only_admin_may_publish_or_subscribe_everything() -> None:
    for user in nats_users(load_directory(PRINCIPALS), admin=True):
        broad = {rule.subject for rule in (*user.publish, *user.subscribe)} & {">", "tg.>"}
        assert bool(broad) is (user.name == ADMIN), user.name


@pytest.mark.parametrize("table", ["principals", "approvers"])
@pytest.mark.parametrize("name", ["a.b", "a*", "a>", " a"])
def test_a_name_that_is_not_one_subject_token_is_refused(table: str, name: str) -> None:
    body = "autonomy = 1" if table == "principals" else "roles = []"
    directory = PrincipalDirectory.from_toml(f'[{table}."{name}"]\n{body}\n')
    with pytest.raises(DirectoryInvalid, match="must match"):
        nats_users(directory)


def test_users_that_would_share_a_password_variable_are_refused() -> None:
    directory = PrincipalDirectory.from_toml("[principals.a-b]\nautonomy = 1\n[principals.a_b]\nautonomy = 1\n")
    with pytest.raises(ValueError, match="agent-a-b, agent-a_b"):
        placeholders(nats_users(directory))


def test_generated_passwords_are_strong_url_safe_and_start_with_a_letter() -> None:
    passwords = generate_passwords(nats_users(SAME_NAME))
    assert all(SAFE_PASSWORD.match(password) and len(password) >= 40 for password in passwords.values())
    assert len(set(passwords.values())) == len(passwords)


@pytest.mark.parametrize("password", ["1starts-with-a-digit", "short", 'has"quote-and-more', "has space-inside-it"])
def test_a_password_that_could_break_the_config_or_the_url_is_refused(password: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        literal({"registry": password})


def test_credentials_put_the_user_into_the_url_and_the_private_inbox_into_the_options() -> None:
    credentials, config = BusCredentials.generate(SAME_NAME)
    agent = agent_user("selfie")
    assert f'"{credentials.passwords[agent]}"' in config
    assert credentials.url("nats://127.0.0.1:4222", agent) == (
        f"nats://{agent}:{credentials.passwords[agent]}@127.0.0.1:4222"
    )
    assert credentials.options(agent)["inbox_prefix"] == f"_INBOX_{agent}".encode()
    assert "inbox_prefix" not in credentials.options("executor")


def test_env_option_prints_one_fresh_password_per_placeholder() -> None:
    printed = CliRunner().invoke(app, ["nats-config", "--principals", str(PRINCIPALS), "--env"])
    assert printed.exit_code == 0, printed.output
    variables = dict(line.split("=", 1) for line in printed.stdout.splitlines())
    assert set(variables) == set(re.findall(r"\$(NATS_[A-Z0-9_]+_PASSWORD)", CONFIG.read_text()))
    assert all(SAFE_PASSWORD.match(password) for password in variables.values())


def test_an_invalid_directory_prints_no_config(tmp_path: Path) -> None:
    broken = tmp_path / "principals.toml"
    broken.write_text('[principals."a.b"]\nautonomy = 1\n')
    printed = CliRunner().invoke(app, ["nats-config", "--principals", str(broken)])
    assert printed.exit_code == 2 and "must match" in printed.output
    assert "authorization" not in printed.stdout
