"""The nats-server lines of operator mode: the trusted operator, the system account, the resolver, the preload.

Pure text (nats-server config syntax, "JWT authentication" / "resolver" in the NATS docs).
The ``full`` resolver keeps every account JWT in its own directory on each server and takes
updates pushed on ``$SYS.REQ.CLAIMS.UPDATE`` (then shares them with the other servers of its
cluster); ``resolver_preload`` seeds it with every account JWT, and a preloaded JWT never
replaces one issued later (a revocation pushed earlier survives a restart on an older file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["PRELOAD_FILE", "preload_config", "server_config"]

PRELOAD_FILE = "preload.conf"
"""The file beside ``server.conf`` holding ``resolver_preload`` (rewritten by each revocation)."""

PRELOAD_HEADER = "# Every account JWT, by public key (rewritten by `effectgate nats-jwt revoke`).\n"

HEADER = """\
# effectgate: nats-server in operator mode (JWT), written by `effectgate nats-jwt init`.
# The same accounts, imports, exports and user permissions as `effectgate nats-config`, as
# JWTs: the operator signed each account, each account its users; CORE signed an activation
# token for each account that imports one of its subjects. Users connect with their .creds file
# (nats.connect(user_credentials=...)). `effectgate nats-jwt revoke USER` pushes the account
# with the user revoked to the running servers ($SYS.REQ.CLAIMS.UPDATE) and rewrites
# preload.conf: no restart. Listen address, ports and store directory come from the command
# line (nats-server -js -sd <store dir> -c server.conf), as with nats.conf.

max_payload: 1MB
jetstream {
  max_memory_store: 256MB
  max_file_store: 4GB
}
"""


def server_config(operator_jwt: str, system_account: str, resolver_dir: str) -> str:
    """``server.conf``: the operator (inlined), the system account, a ``full`` resolver in ``resolver_dir``.

    ``resolver_dir`` is each server's own (a cluster's servers never share one); it includes
    :data:`PRELOAD_FILE` from its own directory.
    """
    resolver = f"resolver: {{\n  type: full\n  dir: {json.dumps(resolver_dir)}\n  allow_delete: false\n}}\n"
    trust = f"operator: {json.dumps(operator_jwt)}\nsystem_account: {system_account}\n"
    return f"{HEADER}\n{trust}{resolver}include {json.dumps(PRELOAD_FILE)}\n"


def preload_config(accounts: Mapping[str, tuple[str, str]]) -> str:
    """``resolver_preload``: ``accounts`` maps a public key to ``(account name, JWT)``, names as comments."""
    entries = "".join(f"  # {name}\n  {key}: {json.dumps(token)}\n" for key, (name, token) in sorted(accounts.items()))
    return f"{PRELOAD_HEADER}resolver_preload: {{\n{entries}}}\n"
