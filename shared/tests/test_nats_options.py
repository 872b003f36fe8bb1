"""NATS_URL as a server list, and credentials as connect options: what is accepted and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from faststream.nats import NatsToken, NatsUserPassword

from effectgate.contracts.bus.nats_credentials import (
    KEEPALIVE,
    NatsUrlInvalid,
    connect_arguments,
    lift_credentials,
    split_servers,
)
from effectgate.shared.config.settings import ServiceSettings
from effectgate.shared.runtime.nats_options import (
    NatsSettingsInvalid,
    broker_security,
    client_options,
    servers_and_auth,
)


def test_a_server_list_is_split_in_order_and_an_empty_entry_is_refused() -> None:
    assert split_servers("nats://a:1, nats://b:2 ,c:3") == ["nats://a:1", "nats://b:2", "c:3"]
    for bad in ("", " ", "nats://a:1,,nats://b:2", "nats://a:1,"):
        with pytest.raises(NatsUrlInvalid, match="empty server"):
            split_servers(bad)


def test_credentials_in_a_url_become_options_for_every_server_and_leave_the_urls() -> None:
    servers, options = lift_credentials(["nats://svc:p%40ss@a:1", "tls://b:2", "tls://svc:p%40ss@c:3"])
    assert servers == ["nats://a:1", "tls://b:2", "tls://c:3"]
    assert options == {"user": "svc", "password": "p@ss"}
    assert lift_credentials(["s3cret@a:1"]) == (["a:1"], {"token": "s3cret"})


def test_two_urls_with_different_credentials_are_refused_without_showing_them() -> None:
    with pytest.raises(NatsUrlInvalid, match="different credentials") as refused:
        lift_credentials(["nats://svc:first-secret@a:1", "nats://svc:second-secret@b:2"])
    assert "secret" not in str(refused.value)


def test_options_given_win_over_the_credentials_in_the_url() -> None:
    servers, options = connect_arguments("nats://u:p@a:1,nats://b:2", {"user": "own", "password": "x"})
    assert servers == ["nats://a:1", "nats://b:2"] and options == {**KEEPALIVE, "user": "own", "password": "x"}


def _settings(**given: object) -> ServiceSettings:
    return ServiceSettings.model_validate({"nats_url": "nats://a:1,nats://b:2", **given})


def test_a_user_and_password_from_their_settings_are_sent_as_options(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    servers, auth = servers_and_auth(_settings(nats_user="svc", nats_password_file=secret))
    assert servers == ["nats://a:1", "nats://b:2"]
    assert client_options(auth) == {"user": "svc", "password": "from-a-file"}
    security = broker_security(auth, None)
    assert isinstance(security, NatsUserPassword) and (security.username, security.password) == ("svc", "from-a-file")
    assert isinstance(broker_security(servers_and_auth(_settings(nats_token="t"))[1], None), NatsToken)


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ({"nats_user": "svc"}, "go together"),
        ({"nats_password": "p"}, "go together"),
        ({"nats_user": "svc", "nats_password": "p", "nats_token": "t"}, "several kinds"),
        ({"nats_url": "nats://svc:p@a:1", "nats_token": "t"}, "both in NATS_URL"),
        ({"nats_nkey_file": "/nonexistent/user.nk"}, "no such file"),
        ({"nats_user": "svc", "nats_password": "p", "nats_password_file": "/x"}, "both set"),
        ({"nats_user": "svc", "nats_password_file": "/nonexistent/password"}, "PASSWORD_FILE"),
    ],
)
def test_unusable_credentials_settings_are_refused_by_name(given: dict[str, object], refusal: str) -> None:
    with pytest.raises(NatsSettingsInvalid, match=refusal):
        servers_and_auth(_settings(**given))


def test_an_empty_identity_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_NATS_USER", "")
    monkeypatch.setenv("EFFECTGATE_NATS_PASSWORD", "")
    monkeypatch.setenv("NATS_URL", "nats://a:1")
    servers, auth = servers_and_auth(ServiceSettings())
    assert servers == ["nats://a:1"] and auth.kinds == [] and client_options(auth) == {}
