"""/readyz's Redis check follows a real redis-server: paused, it is not ready; resumed, ready again."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from effectgate.devstack.servers import ServerProcess, redis_server
from effectgate.shared.runtime.redis_ready import RedisReachable

pytestmark = pytest.mark.connected


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[ServerProcess]:
    with redis_server(tmp_path) as server:
        yield server


async def _until(check: RedisReachable, ready: bool, timeout_s: float = 10.0) -> str | None:
    """The check's answer once it is ready (``None``), or once it says Redis does not answer."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        why = check()
        if (why is None) if ready else (why or "").startswith("Redis does not answer"):
            return why
        assert asyncio.get_running_loop().time() < deadline, f"still {why!r}"
        await asyncio.sleep(0.05)


async def test_the_check_follows_redis_answering(own_redis: ServerProcess) -> None:
    check = RedisReachable(Redis.from_url(own_redis.url), interval_s=0.1, timeout_s=0.3)
    try:
        assert check() == "Redis was not checked yet"  # never ready before an answer
        await _until(check, ready=True)
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            assert await _until(check, ready=False) == "Redis does not answer (TimeoutError)"
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        await _until(check, ready=True)
    finally:
        await check.aclose()


async def test_a_redis_that_is_gone_is_not_ready(own_redis: ServerProcess) -> None:
    check = RedisReachable(Redis.from_url(own_redis.url), interval_s=0.1, timeout_s=0.3)
    own_redis.process.kill()
    own_redis.process.wait()
    try:
        await _until(check, ready=False)
        await asyncio.sleep(0.3)
        assert check() is not None  # still not ready, however often asked
    finally:
        await check.aclose()
