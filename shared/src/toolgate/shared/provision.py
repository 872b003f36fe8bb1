"""Creates the JetStream stream, its durable consumers and the tools KV bucket.

One owner runs this (the registry service at start-up, and ``toolgate up`` before
any service starts); every other service binds to what exists. Consumers are
single-filter (``FilterSubjects`` needs nats-server 2.10; 2.9 ignores it silently).
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from toolgate.shared import catalog

__all__ = ["ACK_WAIT_S", "MAX_DELIVER", "ensure_bus"]

ACK_WAIT_S = 60.0
"""Seconds a delivered message may stay unacknowledged before redelivery."""

MAX_DELIVER = 20
"""Delivery attempts per message and consumer; services answer before the last one."""

STREAM_MAX_AGE_S = 7 * 24 * 3600.0


def stream_config(max_age_s: float = STREAM_MAX_AGE_S) -> StreamConfig:
    """The :data:`catalog.STREAM` configuration: limits retention, file storage."""
    return StreamConfig(
        name=catalog.STREAM,
        subjects=list(catalog.STREAM_SUBJECTS),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        max_age=max_age_s,
        duplicate_window=120.0,
        allow_direct=True,  # direct get by subject: lets NATS permissions scope reads per principal
    )


def consumer_config(spec: catalog.ConsumerSpec) -> ConsumerConfig:
    """Explicit-ack durable pull consumer config for ``spec``."""
    return ConsumerConfig(
        durable_name=spec.durable,
        filter_subject=spec.filter_subject,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=ACK_WAIT_S,
        max_deliver=MAX_DELIVER,
        max_ack_pending=1000,
    )


async def ensure_bus(js: JetStreamContext, max_age_s: float = STREAM_MAX_AGE_S) -> None:
    """Create the stream, every catalog consumer and the tools bucket if absent.

    Raises:
        nats.js.errors.APIError: the server refused a creation.
    """
    try:
        info = await js.stream_info(catalog.STREAM)
    except NotFoundError:
        await js.add_stream(stream_config(max_age_s))
    else:
        if not info.config.allow_direct or list(info.config.subjects or []) != list(catalog.STREAM_SUBJECTS):
            await js.update_stream(stream_config(max_age_s))
    for spec in catalog.CONSUMERS:
        try:
            await js.consumer_info(catalog.STREAM, spec.durable)
        except NotFoundError:
            await js.add_consumer(catalog.STREAM, consumer_config(spec))
    await js.create_key_value(bucket=catalog.TOOLS_BUCKET, history=1)
