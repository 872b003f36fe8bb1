"""The claims of each NATS JWT of effectgate, from the same accounts and users as the static config.

Pure: nothing is signed or read here (:mod:`.topology` signs). Field names and values are
nats-io/jwt v2's, as ``nsc`` writes them: ``sub``, ``name``, ``iat`` (Unix seconds) and a
``nats`` section with ``type`` and ``version: 2`` (``v2/account_claims.go``, ``v2/user_claims.go``,
``v2/activation_claims.go``, ``v2/operator_claims.go``, ``v2/exports.go``, ``v2/imports.go``).

What the static config says, the claims say: an account's exports and imports
(:class:`~effectgate.contracts.bus.nats_accounts.Export` / ``Import``; a rename is the import's
``local_subject``, a pull's export ``response_type: Stream``), JetStream for :data:`CORE` only, a
user's ``pub``/``sub`` allow and deny lists rule for rule (private inboxes included), and every
account's ``default_permissions`` deny everything to a user without its own. Where the static
config restricts an export with ``accounts: [...]``, the JWT export is ``token_req`` and each
importer carries an activation token :data:`CORE` signed for it alone (its ``sub``): another
account that copies the import, or the token, is refused by the server.
"""

from __future__ import annotations

from collections.abc import Mapping

from effectgate.contracts.bus.nats_accounts import Export, Import, NatsAccount
from effectgate.contracts.bus.nats_permissions import NatsUser, Rule
from effectgate.shared.config.nats_jwt.encoding import Claims

__all__ = [
    "SYSTEM_ACCOUNT",
    "SYSTEM_USER",
    "Tokens",
    "account_claims",
    "activation_claims",
    "operator_claims",
    "system_account_claims",
    "system_user_claims",
    "user_claims",
]

SYSTEM_ACCOUNT = "SYS"
"""The system account's name (``system_account`` of the server; ``$SYS.>`` lives there)."""

SYSTEM_USER = "sys"
"""The system account's one user: pushes account JWTs (``$SYS.REQ.CLAIMS.UPDATE``)."""

Tokens = Mapping[tuple[str, str], str]
"""An importing account's activation tokens by ``(kind, subject in the exporting account)``."""

UNLIMITED = {"subs": -1, "data": -1, "payload": -1}
"""No per-connection limit of the JWT's own (the server's ``max_payload`` still applies)."""

ACCOUNT_LIMITS = {**UNLIMITED, "imports": -1, "exports": -1, "wildcards": True, "conn": -1, "leaf": -1}
"""``nsc add account``'s defaults: no JetStream (``mem_storage`` and ``disk_storage`` absent, 0)."""

JETSTREAM = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
"""JetStream enabled, bounded by the server's own limits (the static config's ``jetstream: enabled``)."""

DENY_ALL = {"pub": {"deny": [">"]}, "sub": {"deny": [">"]}}
"""A user without permissions of its own may do nothing (the static config's ``default_permissions``)."""


def _claims(subject: str, name: str, iat: int, kind: str, nats: Claims) -> Claims:
    return {"sub": subject, "name": name, "iat": iat, "nats": {**nats, "type": kind, "version": 2}}


def operator_claims(name: str, subject: str, system_account: str, iat: int) -> Claims:
    """The operator's self-signed claims, naming the system account (``system_account``)."""
    return _claims(subject, name, iat, "operator", {"system_account": system_account})


def system_account_claims(subject: str, iat: int, revocations: Mapping[str, int]) -> Claims:
    """The system account: no exports of its own (the server adds its ``$SYS`` services)."""
    return _claims(subject, SYSTEM_ACCOUNT, iat, "account", _revoked(revocations, {"limits": ACCOUNT_LIMITS}))


def system_user_claims(subject: str, iat: int) -> Claims:
    """The system user: every right in the system account (nothing outside it)."""
    return _claims(subject, SYSTEM_USER, iat, "user", dict(UNLIMITED))


def account_claims(
    account: NatsAccount,
    subject: str,
    accounts: Mapping[str, str],
    iat: int,
    tokens: Tokens,
    revocations: Mapping[str, int],
) -> Claims:
    """The claims of ``account`` (public key ``subject``); each import names its exporter's public key.

    Args:
        account: as :func:`~effectgate.contracts.bus.nats_accounts.nats_accounts` gives it.
        subject: its public key (``A…``).
        accounts: account name to its public key (the exporters of its imports among them).
        iat: issued at, Unix seconds.
        tokens: its activation tokens, one per import.
        revocations: user public key to the Unix second before which (inclusive) its JWTs are refused.

    Raises:
        KeyError: an import has no token in ``tokens``.
    """
    limits = {**ACCOUNT_LIMITS, **(JETSTREAM if account.jetstream else {})}
    nats: Claims = {"limits": limits, "default_permissions": DENY_ALL}
    nats |= {"exports": [_export(one) for one in account.exports]} if account.exports else {}
    imports = [_import(one, accounts[one.account], tokens) for one in account.imports]
    nats |= {"imports": imports} if imports else {}
    return _claims(subject, account.name, iat, "account", _revoked(revocations, nats))


def _revoked(revocations: Mapping[str, int], nats: Claims) -> Claims:
    return {**nats, "revocations": dict(sorted(revocations.items()))} if revocations else nats


def _export(one: Export) -> Claims:
    entry: Claims = {"name": one.subject, "subject": one.subject, "type": one.kind, "token_req": True}
    if one.kind == "service":
        entry["response_type"] = "Stream" if one.response == "stream" else "Singleton"
    return entry


def _import(one: Import, exporter: str, tokens: Tokens) -> Claims:
    entry: Claims = {"name": one.subject, "subject": one.subject, "account": exporter, "type": one.kind}
    entry["token"] = tokens[(one.kind, one.subject)]
    return entry | ({"local_subject": one.to} if one.to else {})


def activation_claims(kind: str, subject: str, importer: str, iat: int) -> Claims:
    """An activation token's claims: the exporter lets account ``importer`` (its ``sub``) import ``subject``."""
    return _claims(importer, subject, iat, "activation", {"subject": subject, "kind": kind})


def user_claims(user: NatsUser, subject: str, iat: int) -> Claims:
    """The claims of ``user`` (public key ``subject``): the static config's publish and subscribe rules."""
    rights = {"pub": _permission(user.publish, user.deny_publish), "sub": _permission(user.subscribe, ())}
    return _claims(subject, user.name, iat, "user", {**rights, **UNLIMITED})


def _permission(allow: tuple[Rule, ...], deny: tuple[Rule, ...]) -> Claims:
    """``{"allow": [...], "deny": [...]}``; nothing allowed is ``deny: [">"]`` (an empty list would allow all)."""
    if not allow:
        return {"deny": [">"]}
    return {"allow": [rule.subject for rule in allow]} | ({"deny": [rule.subject for rule in deny]} if deny else {})
