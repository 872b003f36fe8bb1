"""Every NATS JWT of effectgate signed: the operator, the system account and user, each account and user.

Pure (signing is computation; no file, no clock: ``iat`` is given). The operator signs every
account (``nsc``'s default without signing keys) and itself; each account signs its users;
an exporting account (:data:`~effectgate.contracts.bus.nats_accounts.CORE`, a tool worker's) signs
the activation tokens of its exports.
A revocation is an entry ``<user public key>: <Unix second>`` in its account's ``revocations``:
the server refuses, and disconnects, every connection whose user JWT was issued at or before it
(nats-server ``isRevoked``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from effectgate.contracts.bus.nats_accounts import NatsAccount
from effectgate.shared.config.nats_jwt.claims import (
    SYSTEM_ACCOUNT,
    SYSTEM_USER,
    account_claims,
    activation_claims,
    operator_claims,
    system_account_claims,
    system_user_claims,
    user_claims,
)
from effectgate.shared.config.nats_jwt.encoding import JwtInvalid, decode, public_key, sign

__all__ = ["OPERATOR_NAME", "Keys", "Signed", "revocations_of", "sign_all", "with_revocation"]

OPERATOR_NAME = "effectgate"
"""The operator's ``name``."""


@dataclass(frozen=True)
class Keys:
    """The seeds everything is signed with.

    Attributes:
        operator: the operator's seed (``SO…``).
        accounts: account name (:data:`SYSTEM_ACCOUNT` included) to its seed (``SA…``).
        users: user name (:data:`SYSTEM_USER` included) to its seed (``SU…``).
    """

    operator: bytes
    accounts: Mapping[str, bytes]
    users: Mapping[str, bytes]


@dataclass(frozen=True)
class Signed:
    """The JWTs of one deployment.

    Attributes:
        operator: the operator JWT (the server's ``operator``).
        accounts: account name to its JWT (the server's ``resolver_preload``, by public key).
        users: user name to its JWT (with its seed, its credentials file).
    """

    operator: str
    accounts: dict[str, str]
    users: dict[str, str]


def sign_all(
    accounts: tuple[NatsAccount, ...], keys: Keys, iat: int, revocations: Mapping[str, Mapping[str, int]]
) -> Signed:
    """Sign the operator, the system account and user, ``accounts`` and their users, issued at ``iat``.

    Args:
        accounts: as :func:`~effectgate.contracts.bus.nats_accounts.nats_accounts` gives them.
        keys: a seed for the operator, each account and each user.
        iat: Unix seconds.
        revocations: account name to the revocations it keeps (from its earlier JWT).

    Raises:
        KeyError: ``keys`` lacks a seed.
    """
    pub = {name: public_key(seed) for name, seed in keys.accounts.items()}
    system = pub[SYSTEM_ACCOUNT]
    operator = sign(operator_claims(OPERATOR_NAME, public_key(keys.operator), system, iat), keys.operator)
    claims = {SYSTEM_ACCOUNT: system_account_claims(system, iat, revocations.get(SYSTEM_ACCOUNT, {}))}
    for account in accounts:
        tokens = _tokens(account, pub[account.name], keys.accounts, iat)
        kept = revocations.get(account.name, {})
        claims[account.name] = account_claims(account, pub[account.name], pub, iat, tokens, kept)
    signed = {name: sign(one, keys.operator) for name, one in claims.items()}
    return Signed(operator, signed, _users(accounts, keys, iat))


def _tokens(account: NatsAccount, importer: str, seeds: Mapping[str, bytes], iat: int) -> dict[tuple[str, str], str]:
    """An activation token per import of ``account`` (public key ``importer``), signed by its exporting account."""
    return {
        (one.kind, one.subject): sign(activation_claims(one.kind, one.subject, importer, iat), seeds[one.account])
        for one in account.imports
    }


def _users(accounts: tuple[NatsAccount, ...], keys: Keys, iat: int) -> dict[str, str]:
    system = keys.users[SYSTEM_USER]
    users = {SYSTEM_USER: sign(system_user_claims(public_key(system), iat), keys.accounts[SYSTEM_ACCOUNT])}
    for account in accounts:
        for user in account.users:
            claims = user_claims(user, public_key(keys.users[user.name]), iat)
            users[user.name] = sign(claims, keys.accounts[account.name])
    return users


def revocations_of(account_jwt: str, operator: str) -> dict[str, int]:
    """The revocations an account JWT the operator (public key ``operator``) signed holds.

    Raises:
        JwtInvalid: not an account JWT the operator signed, or its revocations are malformed.
    """
    nats = decode(account_jwt, operator).get("nats", {})
    revoked = nats.get("revocations", {}) if nats.get("type") == "account" else None
    if not isinstance(revoked, dict) or not all(isinstance(t, int) for t in revoked.values()):
        raise JwtInvalid("not an account JWT with a revocations list")
    return {str(user): int(second) for user, second in revoked.items()}


def with_revocation(account_jwt: str, user: str, operator: bytes, now: int) -> str:
    """``account_jwt`` re-signed by ``operator`` with ``user`` (a public key) revoked at ``now`` (Unix seconds).

    Were the clock behind the old JWT's ``iat``, both the revocation and the new JWT take that
    ``iat`` instead: a server keeps the account JWT issued last (nats-server ``saveIfNewer``), and
    a revocation refuses only the user JWTs issued at or before it (issued with the account's).

    Raises:
        JwtInvalid: ``account_jwt`` is not an account JWT ``operator`` signed.
    """
    claims = decode(account_jwt, public_key(operator))
    at = max(now, int(claims["iat"]))
    revoked = {**revocations_of(account_jwt, public_key(operator)), user: at}
    nats = {**claims["nats"], "revocations": dict(sorted(revoked.items()))}
    return sign({**claims, "iat": at, "nats": nats}, operator)
