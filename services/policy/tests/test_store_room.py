"""A new request is denied ``store_full`` once the record is over its high-water mark (a real nats-server)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import nats
import pytest
import pytest_asyncio
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from effectgate.contracts.bus import catalog
from effectgate.contracts.events import ToolRequested, encode, request_identity
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.shared.config.bus import BusLayout
from effectgate.shared.runtime.metrics import RECORD_STORE_USED
from effectgate.shared.stores.provision import ensure_bus, stream_config
from effectgate.shared.stores.record_usage import RecordUsage

pytestmark = [pytest.mark.connected, pytest.mark.nats_2_10]

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LIMIT_BYTES = 20_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with nats_server(tmp_path / "nats") as process:
        yield process


@pytest_asyncio.fixture
async def js(server: ServerProcess) -> AsyncIterator[JetStreamContext]:
    nc = await nats.connect(server.url)
    jetstream = nc.jetstream()
    await ensure_bus(jetstream, BusLayout(record_max_bytes=LIMIT_BYTES))
    yield jetstream
    await nc.close()


def _ports(repo_root: Path, usage: RecordUsage) -> PolicyPorts:
    engine = load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")
    data = (repo_root / "deploy" / "tools" / "file_system.json").read_bytes()
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([msgspec.json.decode(data, type=ToolDescriptor)]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
        room=usage,
    )


def _env(request_id: str, first: bool = True) -> Envelope:
    request = ToolRequested(
        event_id=request_id,
        occurred_at=NOW,
        request_id=request_id,
        tool="file_system",
        operation="read",
        arguments={"path": "a.txt"},
        idempotency_key=f"k-{request_id}",
    )
    data = encode(request)
    return Envelope("demo-agent", data, request_identity(data, None, 7), first_delivery=first)


async def _fill_to(js: JetStreamContext, share: float) -> None:
    while (await js.stream_info(catalog.STREAM)).state.bytes < share * LIMIT_BYTES:
        await js.publish(catalog.Subjects.request("filler"), b"x" * 500, stream=catalog.STREAM)


async def test_over_the_mark_a_new_request_is_denied_store_full_and_a_redelivery_is_decided(
    js: JetStreamContext, repo_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]
    usage = RecordUsage(js, high_water=0.5, clock=lambda: clock[0])
    ports = _ports(repo_root, usage)
    assert (await decide(_env("before"), ports)).verdict is Verdict.EXECUTE
    assert usage.ready() is None
    await _fill_to(js, 0.6)
    clock[0] += 0.5  # the reading is still fresh: the next decision does not read the stream again
    assert (await decide(_env("cached"), ports)).verdict is Verdict.EXECUTE
    clock[0] += 1.0
    with caplog.at_level(logging.ERROR, "effectgate.record_usage"):
        denied = await decide(_env("after"), ports)
    assert (denied.verdict, denied.reason_code) == (Verdict.DENY, "store_full")
    assert f"of {LIMIT_BYTES} bytes, over 50%" in denied.reason and "try again" in denied.reason
    said = [record.getMessage() for record in caplog.records if record.name == "effectgate.record_usage"]
    assert said[0].endswith("new requests are denied store_full")
    assert "nearly full" in (usage.ready() or "")
    assert list(RECORD_STORE_USED.values.values())[0] >= 0.6
    assert (await decide(_env("before", first=False), ports)).verdict is Verdict.EXECUTE


async def test_room_made_again_admits_new_requests(js: JetStreamContext, repo_root: Path) -> None:
    clock = [0.0]
    usage = RecordUsage(js, high_water=0.5, clock=lambda: clock[0])
    ports = _ports(repo_root, usage)
    await _fill_to(js, 0.6)
    assert (await decide(_env("full"), ports)).reason_code == "store_full"
    await js.update_stream(replace(stream_config(BusLayout(record_max_bytes=LIMIT_BYTES * 4))))
    clock[0] += 1.0
    assert (await decide(_env("room"), ports)).verdict is Verdict.EXECUTE
    assert usage.ready() is None


async def test_usage_that_cannot_be_read_denies_new_requests(js: JetStreamContext, repo_root: Path) -> None:
    clock = [0.0]
    usage = RecordUsage(js, high_water=0.5, clock=lambda: clock[0])
    ports = _ports(repo_root, usage)
    assert (await decide(_env("read"), ports)).verdict is Verdict.EXECUTE
    await js.delete_stream(catalog.STREAM)
    clock[0] += 5.0
    assert (await decide(_env("recent"), ports)).verdict is Verdict.EXECUTE  # the last reading is not stale yet
    clock[0] += 10.0
    denied = await decide(_env("unknown"), ports)
    assert (denied.verdict, denied.reason_code) == (Verdict.DENY, "store_full")
    assert "cannot be read" in denied.reason
    await js.add_stream(StreamConfig.from_response(stream_config().as_dict()))


async def test_a_burst_within_one_reading_is_caught_by_the_estimate(js: JetStreamContext, repo_root: Path) -> None:
    clock = [0.0]
    usage = RecordUsage(js, high_water=0.5, clock=lambda: clock[0])
    ports = _ports(repo_root, usage)
    assert (await decide(_env("first"), ports)).verdict is Verdict.EXECUTE  # read now: the stream is nearly empty
    await _fill_to(js, 0.6)  # others wrote meanwhile; the reading is still fresh
    for number in range(LIMIT_BYTES // 1000):
        decision = await decide(_env(f"burst{number}"), ports)
        if decision.reason_code == "store_full":
            break
    assert decision.reason_code == "store_full", "the estimate never made the policy read the stream again"
    assert clock[0] == 0.0 and number < LIMIT_BYTES // (4 * len(_env("x").data))
