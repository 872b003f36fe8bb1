"""The files of ``effectgate nats-jwt``: seeds kept, JWTs and credentials written, revocations recorded.

Layout of the output directory (``--out``), mode 0700; every file holding a seed is 0600::

    operator.nk  operator.jwt                 the operator's seed and self-signed JWT
    accounts/<ACCOUNT>.nk  <ACCOUNT>.jwt      each account (SYS included), signed by the operator
    users/<user>.nk  <user>.creds             each user's seed, and its JWT with the seed (nsc's format)
    server.conf  preload.conf                 the nats-server lines (:mod:`effectgate.shared.config.nats_jwt.server`)

A seed that exists is never replaced, with one exception: a user whose key its account revoked
gets a new one (re-signing the old key after its revocation would make it valid again).
Revocations are kept from the account JWTs already in the directory; an account JWT that the
operator did not sign stops ``init`` rather than losing them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from effectgate.cli.stack.credentials import write_private
from effectgate.contracts.bus.nats_accounts import NatsAccount
from effectgate.shared.config.nats_jwt.claims import SYSTEM_ACCOUNT, SYSTEM_USER
from effectgate.shared.config.nats_jwt.encoding import (
    JwtInvalid,
    KeyKind,
    creds_text,
    new_seed,
    public_key,
    seed_kind,
    unverified,
)
from effectgate.shared.config.nats_jwt.server import PRELOAD_FILE, preload_config, server_config
from effectgate.shared.config.nats_jwt.topology import Keys, Signed, revocations_of, sign_all, with_revocation

__all__ = ["Initialised", "Layout", "account_jwts", "initialise", "revoke"]

_CREDS_JWT = re.compile(r"-----BEGIN NATS USER JWT-----\s*(\S+)\s*------END NATS USER JWT------")


@dataclass(frozen=True)
class Layout:
    """Where each file of one output directory is."""

    root: Path

    def seed(self, kind: KeyKind, name: str = "operator") -> Path:
        """The seed file of the operator, an account or a user."""
        return {"operator": self.root / "operator.nk", "account": self.root / "accounts" / f"{name}.nk"}.get(
            kind, self.root / "users" / f"{name}.nk"
        )

    def account_jwt(self, name: str) -> Path:
        """``accounts/<name>.jwt``."""
        return self.root / "accounts" / f"{name}.jwt"

    def creds(self, user: str) -> Path:
        """``users/<user>.creds``: what the user connects with."""
        return self.root / "users" / f"{user}.creds"


@dataclass(frozen=True)
class Initialised:
    """What ``init`` did.

    Attributes:
        created: the keys it generated (``operator``, ``account <NAME>``, ``user <name>``); empty on a re-run.
        signed: every JWT it wrote.
    """

    created: list[str]
    signed: Signed


def _seed(path: Path, kind: KeyKind, created: list[str], label: str, fresh: bool = False) -> bytes:
    """The seed in ``path``, or a new one written there (0600) when there is none or ``fresh``.

    Raises:
        JwtInvalid: ``path`` holds something else than a ``kind`` seed.
    """
    if path.exists() and not fresh:
        seed = path.read_bytes().strip()
        if seed_kind(seed) != kind:
            raise JwtInvalid(f"{path} is not an nkeys {kind} seed")
        return seed
    seed = new_seed(kind)
    write_private(path, seed.decode() + "\n")
    created.append(label)
    return seed


def _kept_revocations(layout: Layout, names: list[str], operator: str) -> dict[str, dict[str, int]]:
    """Each account's revocations from its JWT in ``layout`` (none when it has no JWT yet)."""
    return {
        name: revocations_of(path.read_text().strip(), operator)
        for name in names
        if (path := layout.account_jwt(name)).exists()
    }


def initialise(accounts: tuple[NatsAccount, ...], out: Path, resolver_dir: Path, iat: int) -> Initialised:
    """Keys kept or created, and every JWT, credentials file and the server lines written under ``out``.

    Raises:
        JwtInvalid: a seed file or an account JWT in ``out`` is not what its name says.
        OSError: ``out`` cannot be written.
    """
    layout, created = Layout(out), list[str]()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    operator = _seed(layout.seed("operator"), "operator", created, "operator")
    names = [SYSTEM_ACCOUNT, *(account.name for account in accounts)]
    seeds = {name: _seed(layout.seed("account", name), "account", created, f"account {name}") for name in names}
    revoked = _kept_revocations(layout, names, public_key(operator))
    users = {SYSTEM_USER: _user_seed(layout, SYSTEM_USER, revoked.get(SYSTEM_ACCOUNT, {}), created)}
    for account in accounts:
        users |= {u.name: _user_seed(layout, u.name, revoked.get(account.name, {}), created) for u in account.users}
    signed = sign_all(accounts, Keys(operator, seeds, users), iat, revoked)
    _write(layout, signed, Keys(operator, seeds, users), resolver_dir)
    return Initialised(created, signed)


def _user_seed(layout: Layout, user: str, revoked: dict[str, int], created: list[str]) -> bytes:
    path = layout.seed("user", user)
    stale = path.exists() and _public_or_none(path.read_bytes()) in revoked
    return _seed(path, "user", created, f"user {user}" + (" (its key was revoked)" if stale else ""), fresh=stale)


def _public_or_none(seed: bytes) -> str | None:
    try:
        return public_key(seed)
    except JwtInvalid:
        return None


def _write(layout: Layout, signed: Signed, keys: Keys, resolver_dir: Path) -> None:
    (layout.root / "operator.jwt").write_text(signed.operator + "\n")
    for name, token in signed.accounts.items():
        layout.account_jwt(name).write_text(token + "\n")
    for user, token in signed.users.items():
        write_private(layout.creds(user), creds_text(token, keys.users[user]))
    for folder in ("accounts", "users"):
        (layout.root / folder).chmod(0o700)
    system = public_key(keys.accounts[SYSTEM_ACCOUNT])
    (layout.root / "server.conf").write_text(server_config(signed.operator, system, str(resolver_dir)))
    _write_preload(layout)


def account_jwts(out: Path) -> dict[str, str]:
    """Account name to its JWT, for every ``accounts/<NAME>.jwt`` under ``out``."""
    return {path.stem: path.read_text().strip() for path in sorted((out / "accounts").glob("*.jwt"))}


def _write_preload(layout: Layout) -> None:
    preload = {unverified(token)["sub"]: (name, token) for name, token in account_jwts(layout.root).items()}
    (layout.root / PRELOAD_FILE).write_text(preload_config(preload))


def revoke(user: str, out: Path, now: int) -> tuple[str, str]:
    """Revoke ``user``'s key in its account at ``now`` (Unix seconds; at the latest its JWT's ``iat``); write it.

    Returns:
        ``(account name, its new JWT)``, to push to the running servers.

    Raises:
        FileNotFoundError: ``out`` has no such user (or no operator seed).
        JwtInvalid: the user's credentials, its account's JWT or a seed is not what it should be.
    """
    layout = Layout(out)
    if not layout.creds(user).exists():
        raise FileNotFoundError(f"no user {user} in {layout.root / 'users'} (a NATS user: agent-<p>, approver-<n>, …)")
    user_key, user_jwt = public_key(layout.seed("user", user).read_bytes()), _creds_jwt(layout.creds(user))
    account, issued = _account_of(layout, user_jwt), int(unverified(user_jwt).get("iat", 0))
    operator = layout.seed("operator").read_bytes().strip()
    token = with_revocation(layout.account_jwt(account).read_text().strip(), user_key, operator, max(now, issued))
    layout.account_jwt(account).write_text(token + "\n")
    _write_preload(layout)
    return account, token


def _creds_jwt(path: Path) -> str:
    found = _CREDS_JWT.search(path.read_text())
    if not found:
        raise JwtInvalid(f"{path} holds no user JWT")
    return found.group(1)


def _account_of(layout: Layout, user_jwt: str) -> str:
    """The name of the account that issued ``user_jwt`` (its ``iss`` is the account's public key)."""
    issuer = unverified(user_jwt).get("iss")
    for path in sorted((layout.root / "accounts").glob("*.nk")):
        if _public_or_none(path.read_bytes()) == issuer:
            return path.stem
    raise JwtInvalid(f"no account under {layout.root / 'accounts'} issued this user")
