"""The Synapse helper: a missing environment says how to install it; the config it writes stays on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effectgate.devstack.synapse import INSTALL_HINT, SynapseMissing, synapse_server, write_config


def test_a_missing_synapse_environment_names_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EFFECTGATE_SYNAPSE_ENV", str(tmp_path / "nothing"))
    with pytest.raises(SynapseMissing) as missing, synapse_server(tmp_path / "hs"):
        pass
    assert str(tmp_path / "nothing") in str(missing.value) and INSTALL_HINT in str(missing.value)


def test_the_config_listens_on_loopback_only_without_federation_and_with_generous_limits(tmp_path: Path) -> None:
    config = json.loads(write_config(tmp_path, 8448, "localhost", "s3cret").read_text())
    (listener,) = config["listeners"]
    assert listener["bind_addresses"] == ["127.0.0.1"] and listener["port"] == 8448
    assert [resource["names"] for resource in listener["resources"]] == [["client"]]
    assert config["trusted_key_servers"] == [] and config["federation_domain_whitelist"] == []
    assert config["enable_registration"] is False and config["registration_shared_secret"] == "s3cret"
    assert config["database"]["name"] == "sqlite3"
    assert config["rc_message"]["per_second"] >= 100 and config["rc_login"]["failed_attempts"]["burst_count"] >= 100
    key = (tmp_path / "signing.key").read_text().split()
    assert key[0] == "ed25519" and len(key) == 3
