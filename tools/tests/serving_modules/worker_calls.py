"""What the worker's tests send: signed calls, asked as the executor asks them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client

from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.tools.hosting import CallContext, WorkerAnswer, WorkerCall
from effectgate.contracts.tools.hosting import WorkerSubjects as S
from effectgate.devstack.timing import scaled

NAME = "payments"
WAIT_S = scaled(5.0)
MODULES = Path(__file__).parent
"""The modules a test worker serves (on ``PYTHONPATH`` in a worker process)."""


ROUTED_S = 1.0
"""How long a request is repeated while it meets no responders (a subscription just made), seconds."""


def call(tool: str = "echo", call_id: str = "c1", **changes: Any) -> WorkerCall:
    context = CallContext(
        principal="demo-agent",
        request_id=f"r-{call_id}",
        idempotency_key=f"k-{call_id}",
        deadline=datetime.now(UTC) + timedelta(seconds=30),
    )
    fields: dict[str, Any] = {
        "call_id": call_id, "tool": tool, "version": "1.0.0", "descriptor_digest": "e" * 64,
        "operation": "run", "arguments": {"n": 1}, "context": context, **changes,
    }  # fmt: skip
    return WorkerCall(**fields)


def signed(one: WorkerCall, key: Ed25519PrivateKey) -> bytes:
    return msgspec.json.encode(sign_event(one, key))


async def ask(
    nc: Client, data: bytes, tool: str = "echo", timeout_s: float = WAIT_S, worker: str = NAME
) -> WorkerAnswer:
    deadline = asyncio.get_running_loop().time() + ROUTED_S
    while True:  # a worker just started may not be routed to at once: no responders means nothing ran
        try:
            reply = await nc.request(S.call(worker, tool), data, timeout=timeout_s)
            return msgspec.json.decode(reply.data, type=WorkerAnswer)
        except nats.errors.NoRespondersError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
