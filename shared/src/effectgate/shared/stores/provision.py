"""Creates the JetStream streams, their durable consumers and the KV buckets (tools, policy, chat cards).

One owner runs this (the registry service at start-up, which ``effectgate up`` starts before
any other service; the ``js`` test fixture); every other service binds to what exists.
Every stream and bucket gets the deployment's replica count and the record stream its limits
(:class:`~effectgate.shared.config.bus.BusLayout`); an existing deployment is converged to them
(:mod:`effectgate.shared.stores.converging`). Consumers take no replica count of their own: they
inherit their stream's. Consumers are single-filter but the auditor's (``FilterSubjects`` needs
nats-server 2.10; 2.9 ignores it silently and would deliver every subject): on an older server a
multi-filter consumer is not created at all (logged), so its reader gets nothing rather than too much.
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BadRequestError, NotFoundError

from effectgate.contracts.bus import catalog
from effectgate.contracts.errors import Problem
from effectgate.shared.config.bus import RECORD_MAX_AGE_S, BusLayout
from effectgate.shared.stores.converging import ensure_bucket, ensure_stream

__all__ = [
    "BYTE_LIMIT_SINCE",
    "MULTI_FILTER_SINCE",
    "STREAM_MAX_AGE_S",
    "LayoutRefused",
    "consumer_config",
    "ensure_bus",
    "results_stream_config",
    "server_version",
    "stream_config",
]

log = logging.getLogger("effectgate.provision")

STREAM_MAX_AGE_S = RECORD_MAX_AGE_S
"""How long the record stream keeps events by default, seconds."""

MULTI_FILTER_SINCE = (2, 10)
"""The first nats-server release that honours a consumer's ``filter_subjects``."""

BYTE_LIMIT_SINCE = (2, 10)
"""The first nats-server release that refuses new messages at ``max_bytes`` under discard ``new``
(2.9 silently drops the oldest instead: a byte limit there would erase the record)."""


class LayoutRefused(Problem):
    """The bus layout cannot be honoured by this server (e.g. a byte limit on nats-server 2.9); ``str()`` says why."""


def _limits_stream(name: str, subjects: tuple[str, ...], max_age_s: float, layout: BusLayout) -> StreamConfig:
    """Limits retention, file storage, a 2-minute duplicate window, direct get by subject, ``layout.replicas``.

    Direct get by subject lets NATS permissions scope reads to one principal's subjects.
    """
    return StreamConfig(
        name=name,
        subjects=list(subjects),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=max_age_s,
        duplicate_window=120.0,
        allow_direct=True,
        num_replicas=layout.replicas,
        discard=DiscardPolicy.OLD,
        max_bytes=-1,
    )


def stream_config(layout: BusLayout | None = None) -> StreamConfig:
    """The :data:`catalog.STREAM` configuration: the record of every event.

    Discard is always ``new``: at a limit the new message is refused, never the oldest dropped
    (claims, receipts and index rebuilds rely on the record).
    """
    layout = layout or BusLayout()
    config = _limits_stream(catalog.STREAM, catalog.STREAM_SUBJECTS, layout.record_max_age_s, layout)
    config.discard, config.max_bytes = DiscardPolicy.NEW, layout.record_max_bytes or -1
    return config


def results_stream_config(layout: BusLayout | None = None) -> StreamConfig:
    """The :data:`catalog.RESULTS_STREAM` configuration: compressed result chunks, read by subject."""
    layout = layout or BusLayout()
    return _limits_stream(catalog.RESULTS_STREAM, catalog.RESULTS_SUBJECTS, layout.results_max_age_s, layout)


def server_version(js: JetStreamContext) -> tuple[int, int]:
    """``(major, minor)`` of the nats-server ``js``'s connection is on (from its INFO); ``(0, 0)``: unknown."""
    version = js._nc.connected_server_version
    return (version.major, version.minor) if version.major else (0, 0)


def _check_layout(js: JetStreamContext, layout: BusLayout) -> None:
    if layout.record_max_bytes is not None and server_version(js) < BYTE_LIMIT_SINCE:
        found = ".".join(map(str, server_version(js)))
        raise LayoutRefused(
            f"record_max_bytes={layout.record_max_bytes} needs nats-server 2.10 or later (this one is {found}): "
            "older servers drop the oldest events at the limit instead of refusing new ones; unset "
            "EFFECTGATE_BUS_RECORD_MAX_BYTES or upgrade the server"
        )


def consumer_config(spec: catalog.ConsumerSpec) -> ConsumerConfig:
    """Explicit-ack durable pull consumer config for ``spec``."""
    return ConsumerConfig(
        durable_name=spec.durable,
        filter_subject=spec.filter_subject,
        filter_subjects=list(spec.filter_subjects) or None,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=spec.ack_wait_s,
        max_deliver=spec.max_deliver,
        max_ack_pending=spec.max_ack_pending,
    )


def _filters(config: ConsumerConfig) -> tuple[str | None, tuple[str, ...]]:
    return config.filter_subject or None, tuple(config.filter_subjects or ())


async def _ensure_consumer(js: JetStreamContext, spec: catalog.ConsumerSpec) -> None:
    if spec.filter_subjects and server_version(js) < MULTI_FILTER_SINCE:
        log.warning("consumer %s not created: its filter_subjects need nats-server 2.10 or later", spec.durable)
        return
    wanted = consumer_config(spec)
    try:
        current = (await js.consumer_info(catalog.STREAM, spec.durable)).config
    except NotFoundError:
        await js.add_consumer(catalog.STREAM, wanted)
        return
    stored = (current.ack_wait, current.max_deliver, current.max_ack_pending)
    if _filters(current) != _filters(wanted):
        await _refiltered(js, wanted)
    elif stored != (wanted.ack_wait, wanted.max_deliver, wanted.max_ack_pending):
        await js.add_consumer(catalog.STREAM, wanted)


async def _refiltered(js: JetStreamContext, wanted: ConsumerConfig) -> None:
    """Give a consumer its new filter: in place (nats-server 2.10+), else by making it again.

    A consumer made again starts from the stream's first message of its new filter; every
    consumer's handler is idempotent on what it was delivered before.
    """
    try:
        await js.add_consumer(catalog.STREAM, wanted)
    except BadRequestError:
        await js.delete_consumer(catalog.STREAM, wanted.durable_name or "")
        await js.add_consumer(catalog.STREAM, wanted)


BUCKET_TTL_S = {catalog.MCP_CALLS_BUCKET: catalog.MCP_CALLS_MAX_AGE_S, catalog.LEASES_BUCKET: catalog.LEASE_TTL_S}
"""How long each bucket that forgets keeps an entry, seconds; the others keep theirs forever."""


async def ensure_bus(js: JetStreamContext, layout: BusLayout | None = None) -> None:
    """Create, or converge to ``layout``, both streams, every consumer and the KV buckets (tools … leases).

    Args:
        js: a JetStream context of the bus owner.
        layout: replicas and limits (default: one replica, no byte limit).

    Raises:
        LayoutRefused: ``layout`` asks what this server cannot honour (a byte limit before 2.10).
        nats.js.errors.APIError: the server refused a creation (a refused change of something
            that exists is logged, not raised).
    """
    layout = layout or BusLayout()
    _check_layout(js, layout)
    await ensure_stream(js, stream_config(layout))
    await ensure_stream(js, results_stream_config(layout))
    for spec in catalog.CONSUMERS:
        await _ensure_consumer(js, spec)
    for bucket in catalog.BUCKETS:
        await ensure_bucket(js, bucket, layout.replicas, BUCKET_TTL_S.get(bucket))
