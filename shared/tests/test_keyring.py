"""Each holder's keys directory holds its own private key and the public keys it verifies, nothing more."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from effectgate.contracts.integrity.signing import generate_keypair
from effectgate.shared.config.keyring import (
    HOLDERS,
    PUBLIC,
    KeyLayoutError,
    check_holds_only_own,
    lay_out_keys,
    load_own_private_key,
)


def test_the_layout_gives_each_holder_only_its_own_private_key(tmp_path: Path) -> None:
    lay_out_keys(tmp_path)
    for name, holder in HOLDERS.items():
        private = sorted(path.stem for path in (tmp_path / name).glob("*.key"))
        assert private == sorted([*([holder.signs] if holder.signs else []), *holder.also_holds]), name
        own = {holder.signs, *holder.also_holds}
        public = sorted(path.stem for path in (tmp_path / name).glob("*.pub") if path.stem not in own)
        assert public == sorted(holder.verifies), name
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o700, name
        for key in (tmp_path / name).glob("*.key"):
            assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    assert not list((tmp_path / PUBLIC).glob("*.key"))
    signers = {holder.signs for holder in HOLDERS.values() if holder.signs}
    assert {path.stem for path in (tmp_path / PUBLIC).glob("*.pub")} == signers | {"sealing"}


def test_laying_out_again_keeps_every_key(tmp_path: Path) -> None:
    lay_out_keys(tmp_path)
    before = {path: path.read_bytes() for path in tmp_path.rglob("*.key")}
    lay_out_keys(tmp_path)
    assert {path: path.read_bytes() for path in tmp_path.rglob("*.key")} == before


@pytest.mark.parametrize(
    ("holder", "foreign"), [("policy", "approvals"), ("approvals", "policy"), ("executor", "operator")]
)
def test_a_holder_refuses_a_directory_with_another_private_key(tmp_path: Path, holder: str, foreign: str) -> None:
    generate_keypair(tmp_path, str(HOLDERS[holder].signs))
    generate_keypair(tmp_path, foreign)
    with pytest.raises(KeyLayoutError, match=f"{foreign}.key"):
        load_own_private_key(tmp_path, holder)


@pytest.mark.parametrize("holder", ["audit", "registry"])
def test_a_holder_without_a_signing_key_refuses_any_private_key(tmp_path: Path, holder: str) -> None:
    check_holds_only_own(tmp_path, holder)
    generate_keypair(tmp_path, "receipts")
    with pytest.raises(KeyLayoutError, match="receipts.key"):
        check_holds_only_own(tmp_path, holder)


def test_the_executor_may_also_hold_its_sealing_key(tmp_path: Path) -> None:
    generate_keypair(tmp_path, "receipts")
    (tmp_path / "sealing.key").write_text("x")
    assert load_own_private_key(tmp_path, "executor") is not None
