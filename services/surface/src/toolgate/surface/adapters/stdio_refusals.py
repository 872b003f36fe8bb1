"""Stdio lines that are no JSON-RPC message get a parse error, not silence.

The SDK's stdio reader turns a line it cannot parse into an exception on the read stream,
which the server loop drops. Between the two, each such line is answered with a JSON-RPC
error ``-32700`` whose ``id`` is ``null`` (JSON-RPC 2.0 §5.1: the id could not be read) and
logged to stderr once; the session goes on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError

__all__ = ["answering_garbage"]

log = logging.getLogger("toolgate.surface.stdio")
_REASON_CHARS = 200


@contextlib.asynccontextmanager
async def answering_garbage(read: Any, write: Any) -> AsyncIterator[Any]:
    """``read`` with every unparsable line answered on ``write`` and left out (the streams of ``stdio_server``)."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with send:
            async for item in read:
                if isinstance(item, Exception):
                    await _refuse(write, item)
                else:
                    await send.send(item)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump)
        yield receive
        tasks.cancel_scope.cancel()


async def _refuse(write: Any, error: Exception) -> None:
    reason = " ".join(str(error).split())[:_REASON_CHARS]
    log.warning("a stdin line is no JSON-RPC message: %s", reason)
    refusal = ErrorData(code=PARSE_ERROR, message=f"not a JSON-RPC message: {reason}")
    await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=refusal)))
