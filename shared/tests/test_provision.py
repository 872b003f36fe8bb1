"""Provisioning brings an existing deployment's consumers up to the catalog."""

from __future__ import annotations

import pytest
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.shared.stores.provision import consumer_config, ensure_bus

pytestmark = pytest.mark.connected


async def test_a_consumer_with_an_older_filter_gets_the_catalog_one(js: JetStreamContext) -> None:
    spec = catalog.APPROVALS_CONSUMER
    older = consumer_config(spec)
    older.filter_subject = catalog.Subjects.DECISIONS  # what the approvals consumer read before
    await js.delete_consumer(catalog.STREAM, spec.durable)
    await js.add_consumer(catalog.STREAM, older)
    await ensure_bus(js)
    config = (await js.consumer_info(catalog.STREAM, spec.durable)).config
    assert config.filter_subject == catalog.Subjects.NEEDS_APPROVAL
    assert (config.max_deliver, config.ack_wait) == (spec.max_deliver, spec.ack_wait_s)


async def test_the_stream_is_given_the_catalog_subjects(js: JetStreamContext) -> None:
    info = await js.stream_info(catalog.STREAM)
    older = info.config
    older.subjects = [subject for subject in catalog.STREAM_SUBJECTS if subject != catalog.Subjects.NEEDS_APPROVAL]
    await js.update_stream(older)
    await ensure_bus(js)
    assert (await js.stream_info(catalog.STREAM)).config.subjects == list(catalog.STREAM_SUBJECTS)
