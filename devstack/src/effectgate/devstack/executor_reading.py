"""An executor's answer to ``tg.executor.contents`` for tests that run the approvals service without one.

The approvals service opens an approval only with the executor's signed reading of the call's
file references (``docs/explanation/services/executor.md``, "What an approval binds behind a reference"). Tests
of the approvals service on a real NATS that start no executor answer for it: every call names
no file (``contents=()``), signed with a receipts key of the test's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client
from nats.aio.msg import Msg

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.contents import ContentAnswer, ContentQuery

__all__ = ["no_files_read"]

_query = msgspec.json.Decoder(ContentQuery)


@asynccontextmanager
async def no_files_read(nc: Client, key: Ed25519PrivateKey) -> AsyncIterator[None]:
    """Answer every content query on ``nc`` while open: read, no file named, signed by ``key``."""

    async def answer(msg: Msg) -> None:
        query = _query.decode(msg.data)
        found = ContentAnswer(
            ok=True,
            reason_code="read",
            reason="read",
            request_hash=query.request_hash,
            checked_at=datetime.now(UTC),
        )
        await msg.respond(msgspec.json.encode(sign_event(found, key)))

    subscription = await nc.subscribe(Rpc.EXECUTOR_CONTENTS, cb=answer)
    try:
        yield
    finally:
        await subscription.unsubscribe()
