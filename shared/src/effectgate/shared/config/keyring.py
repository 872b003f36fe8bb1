"""Where each signing key lives: one directory per holder, its own private key only."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from effectgate.contracts.errors import Problem
from effectgate.contracts.integrity.sealing import generate_sealing_keypair
from effectgate.contracts.integrity.signing import generate_keypair, load_private_key, load_public_key

__all__ = [
    "HOLDERS",
    "PUBLIC",
    "Holder",
    "KeyLayoutError",
    "check_holds_only_own",
    "lay_out_keys",
    "load_own_private_key",
    "load_public_keys",
    "public_key_of",
]


@dataclass(frozen=True)
class Holder:
    """What one holder's keys directory contains.

    Attributes:
        signs: the Ed25519 key it signs with (``<signs>.key``), if any.
        verifies: the public keys it verifies (``<name>.pub``).
        also_holds: other private keys of its own (``<name>.key``), e.g. the executor's sealing key.
    """

    signs: str | None
    verifies: tuple[str, ...] = ()
    also_holds: tuple[str, ...] = ()


HOLDERS: Final[dict[str, Holder]] = {
    "policy": Holder("policy", ("approvals", "receipts")),
    "approvals": Holder("approvals", ("policy", "receipts")),
    "executor": Holder("receipts", ("policy", "approvals", "operator"), also_holds=("sealing",)),
    "audit": Holder(None, ("policy", "approvals", "receipts")),
    "registry": Holder(None, ("operator",)),
    "operator": Holder("operator"),
    "chatops": Holder(None, ("approvals", "receipts")),
}
"""Holder directory name → what it holds."""

PUBLIC: Final = "public"
"""The directory holding every public key."""


class KeyLayoutError(Problem):
    """A keys directory holds a private key that is not its holder's, or lacks its own."""


def lay_out_keys(root: Path) -> None:
    """Create the layout of this module's docstring under ``root``; existing keys are kept.

    Private keys are written with mode 0600 and never copied; public keys are copied to
    each holder that verifies them and to ``<root>/public`` (with the executor's X25519
    ``sealing.pub``, which agents seal secret arguments to: :mod:`effectgate.contracts.integrity.sealing`).
    """
    public = root / PUBLIC
    public.mkdir(parents=True, exist_ok=True)
    for name, holder in HOLDERS.items():
        (root / name).mkdir(mode=0o700, parents=True, exist_ok=True)
        if holder.signs and not (root / name / f"{holder.signs}.key").exists():
            generate_keypair(root / name, holder.signs)
        if holder.signs:
            shutil.copyfile(root / name / f"{holder.signs}.pub", public / f"{holder.signs}.pub")
    if not (root / "executor" / "sealing.key").exists():
        generate_sealing_keypair(root / "executor")
    shutil.copyfile(root / "executor" / "sealing.pub", public / "sealing.pub")
    for name, holder in HOLDERS.items():
        for verified in holder.verifies:
            shutil.copyfile(public / f"{verified}.pub", root / name / f"{verified}.pub")


def load_own_private_key(keys_dir: Path, holder: str) -> Ed25519PrivateKey:
    """Read the signing key of ``holder`` (a :data:`HOLDERS` name) from ``keys_dir``.

    Refuses a directory that holds any private key the holder does not own.

    Raises:
        KeyLayoutError: ``keys_dir`` holds another private key (named), so this holder could
            sign as someone else.
        OSError / ValueError: the key is missing or not a base64 32-byte Ed25519 key.
    """
    check_holds_only_own(keys_dir, holder)
    return load_private_key(keys_dir / f"{HOLDERS[holder].signs}.key")


def check_holds_only_own(keys_dir: Path, holder: str) -> None:
    """Refuse a keys directory holding a private key ``holder`` does not own.

    Raises:
        KeyLayoutError: a foreign ``*.key`` is in ``keys_dir`` (all are named).
    """
    own = HOLDERS[holder]
    mine = {f"{name}.key" for name in (own.signs, *own.also_holds) if name}
    foreign = sorted(path.name for path in keys_dir.glob("*.key") if path.name not in mine)
    if foreign:
        raise KeyLayoutError(
            f"{keys_dir} holds {', '.join(foreign)}, which the {holder} must not hold: each service "
            "keeps only its own private key (see effectgate.shared.config.keyring)"
        )


def public_key_of(keys_dir: Path, name: str) -> Ed25519PublicKey:
    """Read ``<keys_dir>/<name>.pub``.

    Raises:
        OSError / ValueError: the key is missing or invalid.
    """
    return load_public_key(keys_dir / f"{name}.pub")


def load_public_keys(keys_dir: Path, names: tuple[str, ...]) -> dict[str, Ed25519PublicKey]:
    """The public keys among ``names`` present in ``keys_dir`` (a missing one is left out).

    Raises:
        ValueError: a present key file is not a base64 32-byte Ed25519 key.
    """
    return {name: public_key_of(keys_dir, name) for name in names if (keys_dir / f"{name}.pub").exists()}
