"""Redis clients for one server or for a primary watched by Sentinels, with the same short timeouts.

Every Redis user gets its client from :func:`client_for_url` (through
:func:`effectgate.shared.runtime.connections.redis_client`). A ``redis+sentinel://`` URL
(:mod:`effectgate.shared.runtime.redis_urls`) gives redis-py's own Sentinel client
(``Sentinel(...).master_for(...)``): each new connection asks the Sentinels where the
primary is, so after a failover the next call reaches the promoted replica.

Replication is asynchronous: a promoted replica may lack the latest writes while holding
the indexes' epoch markers, which it copied earlier. So an epoch marker carries the
replication id of the primary that set it (:data:`STAMP_EPOCH`), and every connection
through Sentinel first drops each marker another primary set (:data:`FENCE`): after a
failover every index reads as lost and is rebuilt from the stream before anything is
claimed on it (``docs/explanation/architecture.md``, "Redis failover through Sentinel").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from effectgate.shared.runtime.redis_urls import SENTINEL_SCHEME, parse_sentinel_url

if TYPE_CHECKING:
    import redis.asyncio as aioredis

__all__ = ["EPOCH_KEYS", "FENCE", "STAMP_EPOCH", "client_for_url"]

EPOCH_KEYS = ("tg:epoch:idem", "tg:epoch:approvals", "tg:epoch:budgets")
"""The epoch markers of the indexes rebuilt from the stream (executor, approvals, policy)."""

_REPLID = "local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%w+)')\n"

STAMP_EPOCH = (
    _REPLID
    + """-- the epoch value: '<replication id of this primary>:<epoch>'
local function stamped(epoch) return replid .. ':' .. epoch end
"""
)
"""Lua defining ``stamped(epoch)``: the epoch value bound to this server's replication id."""

FENCE = (
    _REPLID
    + """-- KEYS: epoch markers. Drops each one another primary set; returns how many it dropped.
local dropped = 0
for _, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value and string.sub(value, 1, string.len(replid) + 1) ~= replid .. ':' then
    redis.call('DEL', key)
    dropped = dropped + 1
  end
end
return dropped
"""
)
"""Lua run first on every connection through Sentinel: a marker a promoted replica copied is dropped."""


def client_for_url(url: str, timeout_s: float) -> aioredis.Redis:
    """A client for ``url`` (one server, or ``redis+sentinel://``) with ``timeout_s`` socket timeouts.

    redis-py's defaults (5 s timeouts, 10 retries) would stall each call for seconds. One
    immediate retry, on a broken connection only (never on a timeout): after a restart or a
    failover the first command on a pooled socket fails although a server is up; the retry
    reconnects (through Sentinel: to the primary it names now). Every effectgate script is
    exact under that retry (claims carry a nonce, completions and resolutions are idempotent).

    Raises:
        ValueError: a malformed Sentinel URL (the message names what is wrong).
    """
    if url.startswith(f"{SENTINEL_SCHEME}://"):
        return _sentinel_client(url, timeout_s)
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(url, **_options(timeout_s))


def _options(timeout_s: float) -> dict[str, Any]:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    return {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": retry,
        "health_check_interval": 0,
    }


def _sentinel_client(url: str, timeout_s: float) -> aioredis.Redis:
    from redis.asyncio.sentinel import Sentinel

    from effectgate.shared.runtime.redis_fence import FencedConnection

    where = parse_sentinel_url(url)
    sentinel = Sentinel(list(where.sentinels), sentinel_kwargs=_options(timeout_s))  # type: ignore[no-untyped-call]
    credentials = {"username": where.username, "password": where.password, "db": where.db}
    options = {**_options(timeout_s), **credentials}
    client: aioredis.Redis = sentinel.master_for(where.master, connection_class=FencedConnection, **options)
    return client
