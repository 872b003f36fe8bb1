"""Test support for the services: a counting HTTP server on 127.0.0.1 proving nothing is fetched."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class RemoteDocuments:
    """Serves the schema ``{}`` (accepts anything) at every path and records each request.

    Attributes:
        base: ``http://127.0.0.1:<port>``.
        hits: the path of every request received, in order.
    """

    base: str
    hits: list[str] = field(default_factory=list)


@pytest.fixture
def remote() -> Iterator[RemoteDocuments]:
    """A :class:`RemoteDocuments` on a free loopback port, stopped after the test."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield RemoteDocuments(f"http://127.0.0.1:{server.server_address[1]}", hits)
    server.shutdown()
    server.server_close()
    thread.join()
