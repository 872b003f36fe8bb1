"""Pull the auditor's consumer into the output file: write (durably), then ack, one record at a time.

The consumer (``catalog.AUDITOR_CONSUMER``) keeps one record out at a time, so after a crash its
unacked record comes back (after its ack wait) before any later one: the file stays in stream
order. A record at or below the file's last sequence was written before the crash: it is acked only.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.integrity.signing import load_public_key
from siem_forwarder.output import Output
from siem_forwarder.records import SIGNERS, line_of

__all__ = ["CRASH_ENV", "forward", "load_keys"]

CRASH_ENV = "SIEM_FORWARDER_CRASH"
"""Tests only: ``fetched:<n>`` or ``written:<n>`` kills the process (SIGKILL) at that point of its n-th new record."""


def load_keys(directory: Path) -> dict[str, Ed25519PublicKey]:
    """The signers' public keys found in ``directory`` (``policy.pub``, ``approvals.pub``, ``receipts.pub``).

    A missing key is no error: every record it would verify is flagged.

    Raises:
        ValueError: a key file is not a base64 Ed25519 public key.
    """
    names = {signer.key for signer in SIGNERS}
    return {name: load_public_key(directory / f"{name}.pub") for name in names if (directory / f"{name}.pub").exists()}


class _Crash:
    """The fault the test asked for in :data:`CRASH_ENV`, if any."""

    def __init__(self, spec: str) -> None:
        point, _, count = spec.partition(":")
        self.point, self.count, self.seen = point, int(count or 0), 0

    def at(self, point: str) -> None:
        self.seen += point == "fetched"
        if point == self.point and self.seen == self.count:
            os.kill(os.getpid(), signal.SIGKILL)


async def _handle(msg: Msg, output: Output, keys: Mapping[str, Ed25519PublicKey], crash: _Crash) -> None:
    seq = msg.metadata.sequence.stream
    if seq > output.last:
        crash.at("fetched")
        output.write(line_of(seq, msg.subject, msg.data, msg.metadata.timestamp, keys))
        crash.at("written")
    await msg.ack_sync()


async def forward(
    js: JetStreamContext, output: Output, keys: Mapping[str, Ed25519PublicKey], idle_exit_s: float | None = None
) -> int:
    """Forward records until none came for ``idle_exit_s`` seconds (``None``: forever); how many were handled.

    Raises:
        nats.js.errors.NotFoundError: no auditor consumer (not provisioned, or nats-server before 2.10).
        OSError: the output cannot be written (the record stays unacked and comes back).
    """
    await js.consumer_info(catalog.STREAM, catalog.AUDITOR_CONSUMER.durable)  # a missing one is said, not waited on
    pull = await js.pull_subscribe_bind(catalog.AUDITOR_CONSUMER.durable, catalog.STREAM)
    crash, handled = _Crash(os.environ.get(CRASH_ENV, "")), 0
    idle_since = asyncio.get_running_loop().time()
    while idle_exit_s is None or asyncio.get_running_loop().time() - idle_since < idle_exit_s:
        try:
            messages = await pull.fetch(1, timeout=1.0)
        except NatsTimeout:
            continue
        for msg in messages:
            await _handle(msg, output, keys, crash)
        handled, idle_since = handled + len(messages), asyncio.get_running_loop().time()
    await pull.unsubscribe()
    return handled
