"""Creates the JetStream streams, their durable consumers and the KV buckets (tools, policy, chat cards).

One owner runs this (the registry service at start-up, which ``toolgate up`` starts before
any other service; the ``js`` test fixture); every other service binds to what exists. Consumers are
single-filter (``FilterSubjects`` needs nats-server 2.10; 2.9 ignores it silently).
A consumer whose stored configuration differs from its :class:`catalog.ConsumerSpec`
is updated in place (``$JS.API.CONSUMER.CREATE`` with the same durable name updates
the editable fields on nats-server 2.9 and later); a changed filter subject, which
nats-server 2.9 cannot edit, makes it again there.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from toolgate.contracts import catalog

__all__ = ["STREAM_MAX_AGE_S", "consumer_config", "ensure_bus", "results_stream_config", "stream_config"]

STREAM_MAX_AGE_S = 7 * 24 * 3600.0
"""How long the record stream keeps events, seconds."""

RESULTS_MAX_AGE_S = 8 * 24 * 3600.0
"""How long stored results are kept, seconds: longer than any idempotency record that replays them."""


def _limits_stream(name: str, subjects: tuple[str, ...], max_age_s: float) -> StreamConfig:
    """Limits retention, file storage, a 2-minute duplicate window, direct get by subject.

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
    )


def stream_config(max_age_s: float = STREAM_MAX_AGE_S) -> StreamConfig:
    """The :data:`catalog.STREAM` configuration: the record of every event."""
    return _limits_stream(catalog.STREAM, catalog.STREAM_SUBJECTS, max_age_s)


def results_stream_config(max_age_s: float = RESULTS_MAX_AGE_S) -> StreamConfig:
    """The :data:`catalog.RESULTS_STREAM` configuration: compressed result chunks, read by subject."""
    return _limits_stream(catalog.RESULTS_STREAM, catalog.RESULTS_SUBJECTS, max_age_s)


def consumer_config(spec: catalog.ConsumerSpec) -> ConsumerConfig:
    """Explicit-ack durable pull consumer config for ``spec``."""
    return ConsumerConfig(
        durable_name=spec.durable,
        filter_subject=spec.filter_subject,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=spec.ack_wait_s,
        max_deliver=spec.max_deliver,
        max_ack_pending=spec.max_ack_pending,
    )


async def _ensure_stream(js: JetStreamContext, config: StreamConfig) -> None:
    try:
        info = await js.stream_info(config.name or "")
    except NotFoundError:
        await js.add_stream(config)
        return
    current = info.config
    if not current.allow_direct or list(current.subjects or []) != list(config.subjects or []):
        await js.update_stream(config)


async def _ensure_consumer(js: JetStreamContext, spec: catalog.ConsumerSpec) -> None:
    wanted = consumer_config(spec)
    try:
        current = (await js.consumer_info(catalog.STREAM, spec.durable)).config
    except NotFoundError:
        await js.add_consumer(catalog.STREAM, wanted)
        return
    stored = (current.ack_wait, current.max_deliver, current.max_ack_pending)
    if current.filter_subject != wanted.filter_subject:
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


async def ensure_bus(js: JetStreamContext, max_age_s: float = STREAM_MAX_AGE_S) -> None:
    """Create (or bring up to date) both streams, every consumer and the KV buckets (tools, policy, cards, MCP calls).

    Raises:
        nats.js.errors.APIError: the server refused a creation or an update.
    """
    await _ensure_stream(js, stream_config(max_age_s))
    await _ensure_stream(js, results_stream_config())
    for spec in catalog.CONSUMERS:
        await _ensure_consumer(js, spec)
    await js.create_key_value(bucket=catalog.TOOLS_BUCKET, history=1)
    await js.create_key_value(bucket=catalog.POLICY_BUCKET, history=1)
    await js.create_key_value(bucket=catalog.CARDS_BUCKET, history=1)
    await js.create_key_value(bucket=catalog.MCP_CALLS_BUCKET, history=1, ttl=catalog.MCP_CALLS_MAX_AGE_S)
