"""Bring an existing stream or KV bucket to the configuration provisioning wants, in place.

A changed replica count or limit is applied with ``update_stream``. A KV bucket that exists
with other settings makes ``create_key_value`` fail with err_code 10058 ("stream name already
in use with a different configuration"); its ``KV_<bucket>` stream is then updated instead.
A change the server does not allow (a storage type, more replicas than it has servers) is
said in one log line and the deployment keeps what it has: provisioning goes on, never into a
crash loop. Source: JetStream's stream update rules (``nats-server`` ``stream.go``
``checkStreamCfg`` / ``validateStreamUpdate``).
"""

from __future__ import annotations

import dataclasses
import logging

from nats.js import JetStreamContext
from nats.js.api import StreamConfig, StreamInfo
from nats.js.errors import APIError, NotFoundError

__all__ = ["BUCKET_CONFLICT", "CONVERGED_FIELDS", "ensure_bucket", "ensure_stream"]

log = logging.getLogger("effectgate.provision")

BUCKET_CONFLICT = 10058
"""JetStream err_code: a stream of that name exists with a different configuration."""

CONVERGED_FIELDS = (
    "subjects",
    "allow_direct",
    "num_replicas",
    "max_age",
    "max_bytes",
    "discard",
    "storage",
    "retention",
)
"""The stream configuration fields provisioning brings an existing stream to."""


def _differences(current: StreamConfig, wanted: StreamConfig) -> list[str]:
    """``field: now -> wanted`` for each of :data:`CONVERGED_FIELDS` that differs."""
    found = []
    for name in CONVERGED_FIELDS:
        now, then = getattr(current, name), getattr(wanted, name)
        if name == "subjects":
            now, then = list(now or []), list(then or [])
        if now != then:
            found.append(f"{name}: {_shown(now)} -> {_shown(then)}")
    return found


def _shown(value: object) -> str:
    return str(getattr(value, "value", value))


async def _update(js: JetStreamContext, name: str, wanted: StreamConfig, changes: list[str]) -> None:
    """Apply ``wanted`` to stream ``name``; a refusal, or a change accepted but not applied, is logged in one line."""
    try:
        applied = await js.update_stream(wanted)
    except APIError as refused:
        why = f"{refused.description} (err_code {refused.err_code})"
        log.error("stream %s keeps its configuration: the server refused %s: %s", name, "; ".join(changes), why)
        return
    if _alone(applied, wanted):
        return
    log.info("stream %s converged: %s", name, "; ".join(changes))


def _alone(info: StreamInfo, wanted: StreamConfig) -> bool:
    """Whether ``wanted`` asks for copies a server without a cluster accepted but cannot keep (said in one line).

    nats-server 2.9 accepts ``num_replicas: 3`` on a single server and keeps one copy; later
    releases refuse it (err_code 10074).
    """
    if (wanted.num_replicas or 1) <= 1 or info.cluster is not None:
        return False
    log.error(
        "stream %s keeps its configuration: the server refused num_replicas: 1 -> %d: it is not part of a cluster",
        wanted.name,
        wanted.num_replicas,
    )
    return True


async def ensure_stream(js: JetStreamContext, wanted: StreamConfig) -> None:
    """Create stream ``wanted.name``, or converge it to ``wanted`` (:data:`CONVERGED_FIELDS`).

    Raises:
        nats.js.errors.APIError: the server refused to create it (nothing to run on).
    """
    name = wanted.name or ""
    try:
        current = await js.stream_info(name)
    except NotFoundError:
        _alone(await js.add_stream(wanted), wanted)
        return
    if changes := _differences(current.config, wanted):
        await _update(js, name, wanted, changes)
    else:
        _alone(current, wanted)


async def ensure_bucket(js: JetStreamContext, bucket: str, replicas: int, ttl_s: float | None = None) -> None:
    """Create KV ``bucket`` (history 1, ``replicas`` copies, entries kept ``ttl_s`` seconds; ``None``: forever).

    An existing bucket with other settings (err_code :data:`BUCKET_CONFLICT`, or another
    refusal of the creation, such as more replicas than servers) is converged: its
    ``KV_<bucket>`` stream is given ``replicas`` and ``ttl_s`` in place, or keeps what it has
    when the server refuses that too (logged).

    Raises:
        nats.js.errors.APIError: the server refused to create it, and it does not exist.
    """
    try:
        await js.create_key_value(bucket=bucket, history=1, replicas=replicas, ttl=ttl_s)
    except APIError as refused:
        if refused.err_code != BUCKET_CONFLICT and not await _exists(js, f"KV_{bucket}"):
            raise
        await _converge_bucket(js, f"KV_{bucket}", replicas, ttl_s)


async def _exists(js: JetStreamContext, stream: str) -> bool:
    try:
        await js.stream_info(stream)
    except NotFoundError:
        return False
    return True


async def _converge_bucket(js: JetStreamContext, stream: str, replicas: int, ttl_s: float | None) -> None:
    current = (await js.stream_info(stream)).config
    wanted = dataclasses.replace(current, num_replicas=replicas, max_age=ttl_s or 0.0)
    if changes := _differences(current, wanted):
        await _update(js, stream, wanted, changes)
