"""The Redis URL forms effectgate accepts, checked before anything connects.

``redis://``, ``rediss://`` and ``unix://`` name one server (redis-py's ``from_url``).
``redis+sentinel://[[user]:password@]host:port[,host:port…]/<master name>[/<db>]`` names the
Sentinels that watch a primary and its replicas, and the master name they know it by; the
port defaults to 26379 and the database to 0. The credentials authenticate to the Redis
servers (primary and replicas), not to the Sentinels. No redis-py import here: the settings
check a URL without loading the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["SENTINEL_PORT", "SENTINEL_SCHEME", "SentinelUrl", "checked_redis_url", "parse_sentinel_url"]

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379
"""A Sentinel's port when the URL names none (Redis's own default)."""

_SINGLE = ("redis://", "rediss://", "unix://")


@dataclass(frozen=True)
class SentinelUrl:
    """A parsed ``redis+sentinel://`` URL: ``sentinels`` as ``(host, port)``, ``master`` name, ``db`` number."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None


def checked_redis_url(url: str) -> str:
    """``url`` unchanged if effectgate can connect with it.

    Raises:
        ValueError: neither a single-server scheme nor a well-formed Sentinel URL; the message names why.
    """
    if url.startswith(f"{SENTINEL_SCHEME}://"):
        parse_sentinel_url(url)
    elif not url.startswith(_SINGLE):
        raise ValueError(f"Redis URL must start with redis://, rediss://, unix:// or {SENTINEL_SCHEME}://")
    return url


def parse_sentinel_url(url: str) -> SentinelUrl:
    """The Sentinels, master name, database and credentials of a ``redis+sentinel://`` URL.

    Raises:
        ValueError: wrong scheme, no Sentinel, a port that is not a number in 1..65535, no
            master name, a database that is not a non-negative number, or a query string.
    """
    scheme, _, rest = url.partition("://")
    if scheme != SENTINEL_SCHEME:
        raise ValueError(f"Sentinel URL must start with {SENTINEL_SCHEME}://")
    if "?" in rest or "#" in rest:
        raise ValueError("Sentinel URL takes no query or fragment")
    netloc, _, path = rest.partition("/")
    userinfo, _, hosts = netloc.rpartition("@")
    username, password = _credentials(userinfo)
    return SentinelUrl(_sentinels(hosts), *_master_and_db(path), username=username, password=password)


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, colon, password = userinfo.partition(":")
    return unquote(user) or None, unquote(password) if colon else None


def _sentinels(hosts: str) -> tuple[tuple[str, int], ...]:
    if not hosts:
        raise ValueError("Sentinel URL names no Sentinel (expected host:port[,host:port…] after ://)")
    return tuple(_sentinel(part) for part in hosts.split(","))


def _sentinel(part: str) -> tuple[str, int]:
    host, colon, port = part.rpartition(":") if not part.endswith("]") else (part, "", "")
    if not colon:
        host, port = part, str(SENTINEL_PORT)
    host = host.removeprefix("[").removesuffix("]")
    if not host:
        raise ValueError(f"Sentinel {part!r} has no host")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"Sentinel {part!r}: port {port!r} is not a number in 1..65535")
    return host, int(port)


def _master_and_db(path: str) -> tuple[str, int]:
    master, _, db = path.partition("/")
    if not master:
        raise ValueError("Sentinel URL names no master (expected /<master name>[/<db>] after the Sentinels)")
    db = db.removesuffix("/")
    if "/" in db:
        raise ValueError("Sentinel URL path has more than /<master name>/<db>")
    if db and not db.isdigit():
        raise ValueError(f"Sentinel URL database {db!r} is not a non-negative number")
    return unquote(master), int(db or 0)
