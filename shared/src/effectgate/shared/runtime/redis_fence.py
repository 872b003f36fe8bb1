"""The connection through Sentinel that drops epoch markers a promoted replica copied (see :mod:`.redis_clients`)."""

from __future__ import annotations

from redis.asyncio.sentinel import SentinelManagedConnection

from effectgate.shared.runtime.redis_clients import EPOCH_KEYS, FENCE

__all__ = ["FencedConnection"]


class FencedConnection(SentinelManagedConnection):
    """A Sentinel-managed connection that runs :data:`~.redis_clients.FENCE` before its first command.

    On a replica (Sentinel not yet told of a promotion) the script's ``DEL`` is refused
    (``READONLY``) and redis-py drops the connection, so no command runs there either.
    """

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        """The handshake (AUTH, HELLO, SELECT), then the fence.

        Raises:
            redis.exceptions.RedisError: the handshake or the fence failed (the connection is closed).
        """
        await super().on_connect_check_health(check_health=check_health)
        await self.send_command("EVAL", FENCE, len(EPOCH_KEYS), *EPOCH_KEYS)
        await self.read_response()
