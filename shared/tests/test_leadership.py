"""One holder of a lease at a time, on a real NATS KV bucket (the deployment's leases bucket)."""

from __future__ import annotations

import asyncio
import time

import pytest
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import LEASE_TTL_S, LEASES_BUCKET
from effectgate.shared.runtime.leadership import Leadership

pytestmark = pytest.mark.connected


class Clock:
    """A monotonic clock the test moves (a process stopped and woken)."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now


async def test_one_replica_holds_a_lease_and_a_second_is_refused_while_it_is_renewed(
    js: JetStreamContext, ns: str
) -> None:
    kv = await js.key_value(LEASES_BUCKET)
    first, second = Leadership(kv, ns, "first"), Leadership(kv, ns, "second")
    assert await first.step() and first.held() and first.token is not None
    assert not await second.step() and not second.held() and second.token is None
    assert await first.step() and not await second.step(), "a renewal keeps the lease"
    assert (await kv.get(ns)).value == b"first"


async def test_a_standby_takes_over_a_dead_holder_within_the_ttl_and_its_token_is_higher(
    js: JetStreamContext, ns: str
) -> None:
    kv = await js.key_value(LEASES_BUCKET)
    dead, standby = Leadership(kv, ns, "dead"), Leadership(kv, ns, "standby")
    assert await dead.step()
    started = time.monotonic()
    while not await standby.step():
        assert time.monotonic() - started < LEASE_TTL_S + 2 * standby.renew_every_s, "no takeover within the bound"
        await asyncio.sleep(standby.renew_every_s)
    assert time.monotonic() - started >= LEASE_TTL_S * 2 / 3, "taken before the holder could have stopped acting"
    assert standby.token is not None and dead.token is not None and standby.token > dead.token
    assert not await dead.step() and not dead.held(), "the old holder's revision-checked renewal is refused"


async def test_a_holder_stopped_longer_than_its_validity_no_longer_counts_itself_the_holder(
    js: JetStreamContext, ns: str
) -> None:
    clock = Clock()
    holder = Leadership(await js.key_value(LEASES_BUCKET), ns, "paused", clock=clock)
    assert await holder.step() and holder.held()
    clock.now += LEASE_TTL_S * 2 / 3
    assert not holder.held(), "a holder acts only for two thirds of the TTL after its last renewal"
