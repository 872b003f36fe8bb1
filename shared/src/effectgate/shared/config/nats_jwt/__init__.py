"""The JWT (operator mode) form of effectgate's NATS accounts: keys, signed claims, the server snippet.

Pure: :mod:`.encoding` signs and reads NATS JWTs (nats-io/jwt v2) with nkeys through PyJWT;
:mod:`.claims` builds the operator's, each account's, each user's and each activation's claims
from :func:`effectgate.contracts.bus.nats_accounts.nats_accounts`; :mod:`.topology` signs them
all; :mod:`.server` renders the nats-server lines that trust them. ``effectgate nats-jwt``
(:mod:`effectgate.cli.commands.nats_jwt`) writes the files and pushes updates to running servers.
"""
