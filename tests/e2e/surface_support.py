"""Starting the MCP surface against an e2e stack, and MCP clients that talk to it.

``Surfaces(stack, tmp)`` starts ``python -m effectgate.surface`` processes (HTTP, static token file)
on free ports, as a user would run ``effectgate mcp serve``; each port is bound here first
(:meth:`Surfaces.reserve`) and its socket handed down, so no other program takes it first;
``http_client(url, token, mode)`` is the SDK's own client with a bearer token, in either
protocol era (``legacy`` or ``2026-07-28``).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from effectgate.cli.stack.system import Stack
from effectgate.surface.adapters.tokens import token_digest


def free_port() -> int:
    """A port free now, for a surface that is refused before it binds (one that serves: :meth:`Surfaces.reserve`)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers_http(port: int) -> bool:
    """Whether something answers an HTTP request on ``port`` (a handed-down socket accepts before it is served)."""
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5) as probe:
            probe.settimeout(0.5)
            probe.sendall(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            return bool(probe.recv(16))
    except OSError:
        return False


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """Wait until the surface ``process`` answers HTTP on ``port``.

    Raises:
        RuntimeError: it exited; TimeoutError: no answer in ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the surface exited with {process.returncode}")
        if _answers_http(port):
            return
        time.sleep(0.1)
    raise TimeoutError(f"the surface did not listen on {port} in {timeout_s}s")


class Surfaces:
    """Surface processes of one stack, sharing one token file (``token_of(principal)``)."""

    def __init__(self, stack: Stack, workdir: Path) -> None:
        self.stack, self.workdir = stack, workdir
        self.tokens_file = workdir / "mcp-tokens.toml"
        self.tokens_file.write_text("")
        self._tokens: dict[str, str] = {}
        self._reserved: dict[int, socket.socket] = {}
        self.processes: list[subprocess.Popen[bytes]] = []

    def reserve(self) -> int:
        """A loopback port bound now and held until a surface is started on it (which is handed the socket)."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = int(sock.getsockname()[1])
        self._reserved[port] = sock
        return port

    def token_of(self, principal: str) -> str:
        """A bearer token acting as ``principal`` (written to the token file on first use)."""
        if principal not in self._tokens:
            token = f"tok-{principal}-{os.urandom(6).hex()}"
            entry = f'\n[tokens.{principal}]\nprincipal = "{principal}"\nsha256 = "{token_digest(token)}"\n'
            self.tokens_file.write_text(self.tokens_file.read_text() + entry)
            self._tokens[principal] = token
        return self._tokens[principal]

    def env(self, port: int, **extra: str) -> dict[str, str]:
        """The environment of one surface process on ``port``."""
        credentials = self.stack.state_dir / "credentials"
        env = {
            **os.environ,
            "NATS_URL": self.stack.nats_url,
            "EFFECTGATE_SURFACE_PUBLIC_KEYS_DIR": str(self.stack.public_keys),
            "EFFECTGATE_SURFACE_TOKENS_FILE": str(self.tokens_file),
            "EFFECTGATE_SURFACE_PORT": str(port),
            **extra,
        }
        if credentials.is_dir():
            env["EFFECTGATE_SURFACE_CREDENTIALS_DIR"] = str(credentials)
        return env

    def start(self, **extra: str) -> str:
        """Start one surface (``extra``: more ``EFFECTGATE_SURFACE_*``); return its MCP URL."""
        return self.start_on(self.reserve(), **extra)

    def start_on(self, port: int, **extra: str) -> str:
        """Start one surface on ``port`` (reserved: its socket is handed down); an empty value in ``extra`` unsets."""
        sock = self._reserved.pop(port, None)
        handed = {"EFFECTGATE_SURFACE_SOCKET_FD": str(sock.fileno())} if sock else {}
        env = {name: value for name, value in self.env(port, **handed, **extra).items() if value != ""}
        with (self.workdir / f"surface-{port}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "effectgate.surface"],
                env=env,
                stdout=log,
                stderr=log,
                pass_fds=(sock.fileno(),) if sock else (),
            )
        if sock:
            sock.close()  # the surface holds it now
        self.processes.append(process)
        wait_listening(port, process)
        return f"http://127.0.0.1:{port}/mcp"

    def stop_all(self) -> None:
        for process in self.processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    """The SDK's client on ``url`` with ``Authorization: Bearer <token>`` (``mode``: ``legacy`` or ``2026-07-28``)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0, read=300.0))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, **options) as client:
        yield client


def texts(result: Any) -> str:
    """The text blocks of an MCP result, joined by newlines."""
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def read_whole(client: Client, request_id: str, most_parts: int = 200) -> str:
    """The whole JSON text of a cut result, read part by part with ``effectgate_result`` from the offsets it names."""
    parts, offset = [], 0
    for _ in range(most_parts):
        part = texts(await client.call_tool("effectgate_result", {"request_id": request_id, "offset_bytes": offset}))
        data, _, note = part.partition("\n[effectgate: ")
        parts.append(data)
        if not note:
            return "".join(parts)
        offset = int(re.search(r"from offset (\d+)", note).group(1))  # type: ignore[union-attr]
    raise AssertionError(f"more than {most_parts} parts")
