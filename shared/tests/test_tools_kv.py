"""The tools bucket on real NATS: listing keeps no server state and is never wrongly empty; ``latest`` only rises.

Each test gets a bucket of its own (``ToolsBucket.open(js, bucket)``), so consumer counts
and listings see only what the test did.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import msgspec
import nats
import pytest_asyncio
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.stores.tools_kv import ToolsBucket

LISTINGS = 1_200
"""More listings than the ~1,000 that exhausted the server when each one left a consumer."""


def _descriptor(name: str, version: str = "1.0.0") -> ToolDescriptor:
    spec = OperationSpec(
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(name=name, version=version, adapter="file_system", operations={"get": spec})


@pytest_asyncio.fixture
async def bucket_name(js: JetStreamContext, ns: str) -> AsyncIterator[str]:
    """A fresh bucket configured as the provisioned one (history 1), deleted afterwards."""
    name = f"TOOLS_{ns}"
    await js.create_key_value(bucket=name, history=1)
    yield name
    await js.delete_key_value(name)


@pytest_asyncio.fixture
async def kv(js: JetStreamContext, bucket_name: str) -> KeyValue:
    return await js.key_value(bucket_name)


async def _consumers(js: JetStreamContext, bucket_name: str) -> int:
    return (await js.stream_info(f"KV_{bucket_name}")).state.consumer_count


async def test_listing_1200_times_creates_no_consumer_and_always_answers_in_full(
    js: JetStreamContext, bucket_name: str
) -> None:
    tools = await ToolsBucket.open(js, bucket_name)
    for name in ("alpha", "beta", "gamma"):
        await tools.publish(_descriptor(name))
    await tools.publish(_descriptor("beta", "2.0.0"))
    before = await _consumers(js, bucket_name)

    listings = [[(d.name, d.version) for d in await tools.list()] for _ in range(LISTINGS)]

    expected = [("alpha", "1.0.0"), ("beta", "2.0.0"), ("gamma", "1.0.0")]
    wrong = [index for index, listed in enumerate(listings) if listed != expected]
    assert wrong == [], f"{len(wrong)} of {LISTINGS} listings were not the full list, first: {listings[wrong[0]]}"
    assert await _consumers(js, bucket_name) == before == 0


async def test_an_empty_bucket_lists_nothing(js: JetStreamContext, bucket_name: str) -> None:
    assert await (await ToolsBucket.open(js, bucket_name)).list() == []


async def test_new_tools_published_at_once_by_two_replicas_are_all_listed(
    js: JetStreamContext, nats_url: str, bucket_name: str
) -> None:
    other = await nats.connect(nats_url)
    try:
        replicas = [await ToolsBucket.open(js, bucket_name), await ToolsBucket.open(other.jetstream(), bucket_name)]
        names = [f"tool{index:02d}" for index in range(20)]
        await asyncio.gather(*(replicas[i % 2].publish(_descriptor(name)) for i, name in enumerate(names)))
        for replica in replicas:
            assert [d.name for d in await replica.list()] == names
    finally:
        await other.close()


async def test_versions_published_at_once_by_two_replicas_leave_latest_at_the_highest(
    js: JetStreamContext, nats_url: str, bucket_name: str
) -> None:
    other = await nats.connect(nats_url)
    try:
        replicas = [await ToolsBucket.open(js, bucket_name), await ToolsBucket.open(other.jetstream(), bucket_name)]
        work = [(f"tool{t}", f"1.{v}.0") for t in range(10) for v in range(8)]
        random.Random(7).shuffle(work)
        await asyncio.gather(*(replicas[i % 2].publish(_descriptor(*item)) for i, item in enumerate(work)))
        fresh = await ToolsBucket.open(js, bucket_name)
        assert {d.name: d.version for d in await fresh.list()} == {f"tool{t}": "1.7.0" for t in range(10)}
    finally:
        await other.close()


async def test_a_bucket_written_before_lists_in_full_without_any_migration(
    js: JetStreamContext, kv: KeyValue, bucket_name: str
) -> None:
    """Keys as an earlier registry wrote them (plain ``put``): nothing to rebuild, nothing missing."""
    for name, version in (("old-a", "1.0.0"), ("old-b", "0.3.0"), ("old-b", "0.4.0")):
        await kv.put(f"{name}.{version}", msgspec.json.encode(_descriptor(name, version)))
    await kv.put("latest.old-a", b"1.0.0")
    await kv.put("latest.old-b", b"0.4.0")

    tools = await ToolsBucket.open(js, bucket_name)

    assert [(d.name, d.version) for d in await tools.list()] == [("old-a", "1.0.0"), ("old-b", "0.4.0")]
    await tools.publish(_descriptor("old-b", "0.3.1"))
    assert await tools.latest_version("old-b") == "0.4.0", "an older version never lowers latest"


async def test_a_publish_cut_short_before_latest_is_finished_by_publishing_again(
    js: JetStreamContext, kv: KeyValue, bucket_name: str
) -> None:
    """A crash between storing the version and raising ``latest`` left the tool invisible."""
    await kv.create("cut.1.0.0", msgspec.json.encode(_descriptor("cut")))
    tools = await ToolsBucket.open(js, bucket_name)
    assert await tools.list() == []

    assert await tools.publish(_descriptor("cut")) is False, "the identical version is not stored twice"

    assert [d.name for d in await tools.list()] == ["cut"]


async def test_a_tool_whose_latest_key_was_deleted_is_left_out(
    js: JetStreamContext, kv: KeyValue, bucket_name: str
) -> None:
    tools = await ToolsBucket.open(js, bucket_name)
    for name in ("kept", "gone"):
        await tools.publish(_descriptor(name))
    await kv.delete("latest.gone")

    assert [d.name for d in await tools.list()] == ["kept"]
    await tools.publish(_descriptor("gone"))
    assert [d.name for d in await tools.list()] == ["gone", "kept"]


async def test_a_followed_latest_is_read_once_and_a_raise_is_heard_at_once(
    nc: nats.aio.client.Client, js: JetStreamContext, bucket_name: str
) -> None:
    tools, reader = await ToolsBucket.open(js, bucket_name), await ToolsBucket.open(js, bucket_name)
    await reader.follow_latest(nc)
    reads = 0
    counted = reader._latest

    async def counting(tool: str) -> tuple[str | None, int | None]:
        nonlocal reads
        reads += 1
        return await counted(tool)

    reader._latest = counting  # type: ignore[method-assign]
    assert await reader.latest_version("alpha") is None  # not published: remembered as absent too
    await tools.publish(_descriptor("alpha", "1.0.0"))
    for _ in range(50):
        if await reader.latest_version("alpha") == "1.0.0":
            break
        await asyncio.sleep(0.02)
    await tools.publish(_descriptor("alpha", "1.2.0"))
    for _ in range(50):
        if await reader.latest_version("alpha") == "1.2.0":
            break
        await asyncio.sleep(0.02)
    assert [await reader.latest_version("alpha") for _ in range(100)] == ["1.2.0"] * 100
    assert reads == 1  # every later answer came from the puts it heard


async def test_an_unchanged_bucket_is_listed_again_without_a_read_and_every_write_is_seen(
    nc: nats.aio.client.Client, js: JetStreamContext, kv: KeyValue, bucket_name: str
) -> None:
    tools, reader = await ToolsBucket.open(js, bucket_name), await ToolsBucket.open(js, bucket_name)
    await reader.follow_latest(nc)  # a listing never answers from the followed memory
    for name in ("alpha", "beta"):
        await tools.publish(_descriptor(name))
    reads = 0
    counted = reader._latest

    async def counting(tool: str) -> tuple[str | None, int | None]:
        nonlocal reads
        reads += 1
        return await counted(tool)

    reader._latest = counting  # type: ignore[method-assign]
    listed = [(d.name, d.version) for d in await reader.list()]
    assert listed == [("alpha", "1.0.0"), ("beta", "1.0.0")] and reads == 2
    assert [[(d.name, d.version) for d in await reader.list()] for _ in range(20)] == [listed] * 20
    assert reads == 2  # the bucket did not change: nothing read again

    await tools.publish(_descriptor("alpha", "1.1.0"))
    assert [(d.name, d.version) for d in await reader.list()] == [("alpha", "1.1.0"), ("beta", "1.0.0")]
    await tools.publish(_descriptor("gamma"))
    assert [d.name for d in await reader.list()] == ["alpha", "beta", "gamma"]
    await kv.delete("latest.beta")
    assert [d.name for d in await reader.list()] == ["alpha", "gamma"]
