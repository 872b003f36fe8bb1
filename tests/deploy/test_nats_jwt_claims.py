"""The JWT form of the NATS accounts says what the static config says; its keys stay put; its seeds are private.

``effectgate nats-jwt init`` runs on the small directory of tests/deploy/test_nats_permissions.py;
each account JWT is read back with the operator's public key, each user JWT with its account's,
each activation token with the services' account's (a JWT signed by anyone else is refused).
"""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.commands.nats_jwt_files import Layout, account_jwts, initialise, revoke
from effectgate.contracts.bus.nats_accounts import CORE, NatsAccount, nats_accounts
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.shared.config.nats_jwt.claims import SYSTEM_ACCOUNT, SYSTEM_USER
from effectgate.shared.config.nats_jwt.encoding import Claims, JwtInvalid, decode, new_seed, public_key, sign
from tests.deploy.test_nats_permissions import DIRECTORY

ACCOUNTS = nats_accounts(DIRECTORY)
AGENT = agent_user("demo-agent")
IAT = 1_800_000_000


@pytest.fixture
def out(tmp_path: Path) -> Path:
    initialise(ACCOUNTS, tmp_path / "jwt", tmp_path / "resolver", IAT)
    return tmp_path / "jwt"


def _key(out: Path, kind: str, name: str = "operator") -> str:
    return public_key(Layout(out).seed(kind, name).read_bytes())  # type: ignore[arg-type]


def _account(out: Path, name: str) -> Claims:
    return decode(Layout(out).account_jwt(name).read_text().strip(), _key(out, "operator"))


def _user(out: Path, account: str, user: str) -> Claims:
    token = Layout(out).creds(user).read_text().split("\n")[1]
    return decode(token, _key(out, "account", account))


@pytest.mark.parametrize("account", ACCOUNTS, ids=lambda account: account.name)
def test_each_account_imports_and_exports_what_the_static_config_does(out: Path, account: NatsAccount) -> None:
    claims = _account(out, account.name)
    nats = claims["nats"]
    assert (claims["sub"], claims["name"], nats["type"], nats["version"]) == (
        _key(out, "account", account.name),
        account.name,
        "account",
        2,
    )
    imports = [(one["type"], one["subject"], one.get("local_subject")) for one in nats.get("imports", [])]
    assert imports == [(one.kind, one.subject, one.to) for one in account.imports]
    assert {one["account"] for one in nats.get("imports", [])} <= {_key(out, "account", CORE)}
    exports = [(one["type"], one["subject"], one.get("response_type")) for one in nats.get("exports", [])]
    responses = {"singleton": "Singleton", "stream": "Stream"}
    assert exports == [
        (one.kind, one.subject, responses[one.response] if one.kind == "service" else None) for one in account.exports
    ]
    assert all(one["token_req"] for one in nats.get("exports", []))
    assert nats["default_permissions"] == {"pub": {"deny": [">"]}, "sub": {"deny": [">"]}}


@pytest.mark.parametrize("account", ACCOUNTS[1:], ids=lambda account: account.name)
def test_each_import_carries_a_token_the_services_account_signed_for_that_account_alone(
    out: Path, account: NatsAccount
) -> None:
    for one in _account(out, account.name)["nats"]["imports"]:
        token = decode(one["token"], _key(out, "account", CORE))
        assert token["sub"] == _key(out, "account", account.name)
        assert token["nats"] == {"subject": one["subject"], "kind": one["type"], "type": "activation", "version": 2}


def test_only_the_services_account_has_jetstream(out: Path) -> None:
    enabled = {name for name in account_jwts(out) if _account(out, name)["nats"]["limits"].get("disk_storage")}
    assert enabled == {CORE}


@pytest.mark.parametrize("account", ACCOUNTS, ids=lambda account: account.name)
def test_each_user_jwt_has_the_static_configs_permissions(out: Path, account: NatsAccount) -> None:
    for user in account.users:
        nats = _user(out, account.name, user.name)["nats"]
        assert nats["pub"].get("allow") == [rule.subject for rule in user.publish]
        assert nats["pub"].get("deny", []) == [rule.subject for rule in user.deny_publish]
        assert nats["sub"] == {"allow": [rule.subject for rule in user.subscribe]}
        assert (nats["type"], nats["version"], nats["payload"]) == ("user", 2, -1)


def test_an_agents_inbox_is_its_private_prefix_only(out: Path) -> None:
    (account,) = (a for a in ACCOUNTS if a.users[0].name == AGENT)
    assert _user(out, account.name, AGENT)["nats"]["sub"]["allow"][-1] == f"_INBOX_{AGENT}.>"


def test_the_operator_names_the_system_account_and_signs_itself(out: Path) -> None:
    token = (out / "operator.jwt").read_text().strip()
    claims = decode(token, _key(out, "operator"))
    assert claims["sub"] == claims["iss"] and claims["nats"]["system_account"] == _key(out, "account", SYSTEM_ACCOUNT)
    encoded = token.split(".")[0]
    header = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    assert header == {"alg": "ed25519-nkey", "typ": "JWT"}
    assert _user(out, SYSTEM_ACCOUNT, SYSTEM_USER)["nats"].keys() == {"subs", "data", "payload", "type", "version"}


def test_a_jwt_signed_by_another_key_is_refused(out: Path) -> None:
    forged = sign(_account(out, CORE), new_seed("operator"))
    with pytest.raises(JwtInvalid):
        decode(forged, _key(out, "operator"))


def test_a_second_init_keeps_every_key(out: Path, tmp_path: Path) -> None:
    seeds = {path: path.read_bytes() for path in out.rglob("*.nk")}
    done = initialise(ACCOUNTS, out, tmp_path / "resolver", IAT + 5)
    assert done.created == []
    assert {path: path.read_bytes() for path in out.rglob("*.nk")} == seeds
    assert _account(out, CORE)["iat"] == IAT + 5


def test_seeds_and_credentials_are_readable_by_their_owner_only(out: Path) -> None:
    private = [*out.rglob("*.nk"), *out.rglob("*.creds")]
    assert len(private) > 2 * len(ACCOUNTS)
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in private)
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o700 for path in (out, out / "accounts", out / "users"))


def test_a_revocation_is_written_into_the_account_and_its_preload(out: Path) -> None:
    account, token = revoke(AGENT, out, IAT + 10)
    claims = _account(out, account)
    assert claims["nats"]["revocations"] == {_key(out, "user", AGENT): IAT + 10}
    assert claims["iat"] == IAT + 10 and token in (out / "preload.conf").read_text()


def test_a_revocation_is_never_issued_before_the_jwts_it_replaces_and_revokes(out: Path) -> None:
    """A server keeps the account JWT issued last, and a revocation refuses only JWTs issued at or before it:
    a clock behind the last init must not lose the revocation nor spare the user."""
    account, _ = revoke(AGENT, out, IAT - 100)
    claims = _account(out, account)
    assert claims["iat"] == IAT and claims["nats"]["revocations"] == {_key(out, "user", AGENT): IAT}


def test_init_after_a_revocation_keeps_it_and_gives_the_user_a_new_key(out: Path, tmp_path: Path) -> None:
    revoked = _key(out, "user", AGENT)
    account, _ = revoke(AGENT, out, IAT + 10)
    done = initialise(ACCOUNTS, out, tmp_path / "resolver", IAT + 20)
    assert done.created == [f"user {AGENT} (its key was revoked)"]
    assert _account(out, account)["nats"]["revocations"] == {revoked: IAT + 10}
    assert _key(out, "user", AGENT) != revoked and _user(out, account, AGENT)["sub"] == _key(out, "user", AGENT)


def test_an_account_jwt_the_operator_did_not_sign_stops_init(out: Path, tmp_path: Path) -> None:
    """Its revocations cannot be trusted, and must not be dropped by re-signing it: init refuses."""
    Layout(out).account_jwt(CORE).write_text(sign(_account(out, CORE), new_seed("operator")))
    with pytest.raises(JwtInvalid):
        initialise(ACCOUNTS, out, tmp_path / "resolver", IAT + 5)


def test_the_init_command_creates_the_keys_once_and_revoke_names_an_unknown_user(tmp_path: Path) -> None:
    principals = tmp_path / "principals.toml"
    principals.write_text('[principals.demo-agent]\nautonomy = 1\n[approvers.alice]\nroles = ["operator"]\n')
    init = ["nats-jwt", "init", "--principals", str(principals), "--out", str(tmp_path / "out")]
    first, second = CliRunner().invoke(app, init), CliRunner().invoke(app, init)
    assert first.exit_code == 0 and "new keys: operator, account SYS" in " ".join(first.output.split())
    assert second.exit_code == 0 and "new keys: none" in " ".join(second.output.split())
    unknown = CliRunner().invoke(app, ["nats-jwt", "revoke", "agent-nobody", "--out", str(tmp_path / "out")])
    assert unknown.exit_code == 2 and "no user agent-nobody in" in " ".join(unknown.output.split())
