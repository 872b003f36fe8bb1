"""Stdio lines that are no valid JSON-RPC message get an error answer, not silence.

The SDK's stdio reader turns a line it cannot parse into an exception on the read stream, which
the server loop drops, and reads a request whose ``id`` is an object, an array or a boolean as
a notification, which nobody answers.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from effectgate.surface.adapters.envelopes import bad_id, unreadable

__all__ = ["CheckedStdin", "answering_garbage"]

log = logging.getLogger("effectgate.surface.stdio")
_REASON_CHARS = 200


class CheckedStdin:
    """The process's stdin as UTF-8 lines for ``stdio_server(stdin=…)``; a bad-id request is answered, not passed.

    Lines are held back until :meth:`attach` gives the stream answers go to.
    """

    def __init__(self) -> None:
        self._source = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        self._write: Any = None
        self._attached = anyio.Event()

    def attach(self, write: Any) -> None:
        """Answer refusals on ``write`` (the write stream of ``stdio_server``)."""
        self._write = write
        self._attached.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        await self._attached.wait()
        async for line in self._source:
            data = line.encode(errors="replace")
            if (reason := bad_id(data)) is not None:
                await _answer(self._write, INVALID_REQUEST, reason)
                continue
            if (reason := unreadable(data)) is not None:
                await _answer(self._write, PARSE_ERROR, reason)
                continue
            yield line


@contextlib.asynccontextmanager
async def answering_garbage(read: Any, write: Any) -> AsyncIterator[Any]:
    """``read`` with every unparsable line answered on ``write`` and left out (the streams of ``stdio_server``)."""
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def pump() -> None:
        async with send:
            async for item in read:
                if isinstance(item, Exception):
                    reason = " ".join(str(item).split())[:_REASON_CHARS]
                    await _answer(write, PARSE_ERROR, f"not a JSON-RPC message: {reason}")
                else:
                    await send.send(item)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(pump)
        yield receive
        tasks.cancel_scope.cancel()


async def _answer(write: Any, code: int, reason: str) -> None:
    log.warning("a stdin line refused: %s", reason)
    refusal = ErrorData(code=code, message=reason)
    await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=refusal)))
