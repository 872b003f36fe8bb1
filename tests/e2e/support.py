"""What e2e tests drive and observe a stack with: :class:`Gate`, :class:`Paths` and :class:`DirWatch`.

:class:`Gate` is one module's driver (agents, approvers, receipts, approvals, audit trails, raw
publishes); :class:`Paths` the files its stack works on (:func:`make_tree` builds them, with
the principal directory of :func:`directory_toml`); :class:`DirWatch` inotify(7) on
directories, to count a file's replacements and prove nothing outside the sandbox was touched.
The fixtures that build them are in ``conftest.py``; tests import the types from here.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import nats
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from effectgate.cli.stack.system import Stack
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.bus.nats_permissions import ADMIN, agent_user, approver_user
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.integrity.signing import load_private_key, sign_value
from effectgate.sdk.client import ToolClient

AGENTS_PER_AUTONOMY = 60
APPROVERS = {
    "alice": ["operator"],
    "bob": ["operator", "sre"],
    "carol": ["sre"],
    "selfie": ["operator"],
    "dora": ["finance", "security"],
    "erin": ["finance", "security"],
}
"""``selfie`` is also an agent: the approver named like the requesting principal. Every role the
shipped policy names has as many approvers as its quorum (else the policy does not load)."""

OPERATOR = "bob"
"""The approver whose connection lists approvals and reads the audit trail."""


CONSUMERS_IN_FLOW_ORDER = (
    catalog.POLICY_CONSUMER.durable,
    catalog.APPROVALS_CONSUMER.durable,
    catalog.EXECUTOR_DECISIONS.durable,
    catalog.EXECUTOR_APPROVALS.durable,
    catalog.AUDIT_CONSUMER.durable,
)
"""Upstream first: a service publishes before it acks, so a clean pass in this order is quiet."""

_receipt = msgspec.json.Decoder(ReceiptIssued)


@dataclass(frozen=True)
class Paths:
    """The files one module's stack works on."""

    state: Path
    sandbox: Path
    sibling: Path
    outside: Path
    principals: Path


def directory_toml() -> str:
    lines = []
    for autonomy in (1, 2):
        for index in range(AGENTS_PER_AUTONOMY):
            lines += [f"[principals.a{autonomy}-{index:02d}]", f"autonomy = {autonomy}", 'roles = ["agent"]', ""]
    lines += ["[principals.selfie]", "autonomy = 1", 'roles = ["agent"]', ""]
    for name, roles in APPROVERS.items():
        lines += [f"[approvers.{name}]", f"roles = {json.dumps(roles)}", ""]
    return "\n".join(lines)


def make_tree(base: Path) -> Paths:
    paths = Paths(base / "state", base / "box", base / "box-sibling", base / "outside", base / "principals.toml")
    for directory in (paths.sandbox / "notes", paths.sibling, paths.outside):
        directory.mkdir(parents=True)
    (paths.sandbox / "hello.txt").write_text("hello from the sandbox\n")
    (paths.sandbox / "notes" / "a.txt").write_text("note a\n")
    (paths.outside / "secret.txt").write_text("outside secret\n")
    (paths.sibling / "secret.txt").write_text("sibling secret\n")
    (paths.sandbox / "escape").symlink_to(paths.outside, target_is_directory=True)
    (paths.sandbox / "escape.txt").symlink_to(paths.outside / "secret.txt")
    paths.principals.write_text(directory_toml())
    return paths


class Gate:
    """What a test needs to drive and observe one stack.

    ``nc``/``js`` observe as ``admin`` (every right: counting, reading, forging events);
    agents and approvers act through connections of their own users.
    """

    def __init__(self, stack: Stack, paths: Paths, nc: Client) -> None:
        self.stack, self.paths, self.nc = stack, paths, nc
        self.js = nc.jetstream()
        self._clients: dict[str, ToolClient] = {}
        self._approvers: dict[str, Client] = {}
        self._taken: dict[int, int] = {1: 0, 2: 0}

    def agent(self, autonomy: int = 1) -> str:
        """A principal of the directory no other test of the module used."""
        index = self._taken[autonomy]
        self._taken[autonomy] = index + 1
        return f"a{autonomy}-{index:02d}"

    async def client(self, principal: str) -> ToolClient:
        """A connected :class:`ToolClient` acting as ``principal`` (kept for the module)."""
        if principal not in self._clients:
            self._clients[principal] = await self.connect(principal)
        return self._clients[principal]

    async def connect(self, principal: str) -> ToolClient:
        """A new :class:`ToolClient` connected as ``principal``'s own NATS user; the caller closes it.

        A principal the directory does not list has no user: only ``admin`` can speak for it,
        which is how a test shows the policy service refusing it too.
        """
        user = agent_user(principal) if self.stack.has_user(agent_user(principal)) else ADMIN
        options = self.stack.connect_options(user)
        return await ToolClient.connect(self.stack.nats_url, principal, public_keys=self.stack.public_keys, **options)

    async def approver(self, name: str) -> Client:
        """The connection of approver ``name``'s own user, or ``admin``'s when the server has no such user.

        Only ``admin`` can speak for a name the directory does not list: that is how a test
        shows the approvals service refusing it too.
        """
        if not self.stack.has_user(approver_user(name)):
            return self.nc
        if name not in self._approvers:
            options = self.stack.connect_options(approver_user(name))
            self._approvers[name] = await nats.connect(self.stack.nats_servers, **options)
        return self._approvers[name]

    async def call(
        self,
        principal: str,
        operation: str,
        arguments: dict[str, Any],
        *,
        tool: str = "file_system",
        key: str | None = None,
        timeout_s: float = 20.0,
    ) -> ReceiptIssued:
        """Invoke one tool call as ``principal`` and return its receipt."""
        client = await self.client(principal)
        return await client.invoke(tool, operation, arguments, idempotency_key=key, timeout_s=timeout_s)

    async def submit(self, principal: str, operation: str, arguments: dict[str, Any], key: str | None = None) -> str:
        """Publish one ``file_system`` call; return its request id."""
        client = await self.client(principal)
        return await client.submit("file_system", operation, arguments, idempotency_key=key)

    async def receipt(self, principal: str, request_id: str, timeout_s: float = 20.0) -> ReceiptIssued:
        """The receipt stored on ``tg.receipt.<principal>.<request_id>``, waiting up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                stored = await self.js.get_last_msg(catalog.STREAM, Subjects.receipt(principal, request_id))
                return _receipt.decode(stored.data or b"")
            except NotFoundError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no receipt for {principal}/{request_id} in {timeout_s}s") from None
                await asyncio.sleep(0.1)

    async def count(self, subject: str) -> int:
        """How many stream messages ``subject`` (wildcards allowed) holds."""
        info = await self.js.stream_info(catalog.STREAM, subjects_filter=subject)
        return sum((info.state.subjects or {}).values())

    async def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until every consumer has handled every message (nothing pending or unacked)."""
        deadline = time.monotonic() + timeout_s
        while not await self._quiet():
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumers still busy after {timeout_s}s")
            await asyncio.sleep(0.1)

    async def _quiet(self) -> bool:
        for durable in CONSUMERS_IN_FLOW_ORDER:
            info = await self.js.consumer_info(catalog.STREAM, durable)
            if info.num_pending or info.num_ack_pending:
                return False
        return True

    async def rpc(
        self, subject: str, body: dict[str, Any] | list[Any], timeout_s: float = 5.0, *, approver: str = OPERATOR
    ) -> Any:
        """A core NATS request with a JSON body, sent as ``approver``; the decoded JSON reply."""
        nc = await self.approver(approver)
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=timeout_s)
        return json.loads(reply.data)

    async def approvals(self) -> list[dict[str, Any]]:
        """Every pending approval, page after page from ``tg.approvals.list`` (a refused page: what came before)."""
        found: list[dict[str, Any]] = []
        after = None
        while True:
            page = await self.rpc(Rpc.APPROVALS_LIST, {"after": after})
            if not page.get("ok"):
                return found
            found += page["approvals"]
            if (after := page["next"]) is None:
                return found

    async def pending(self, request_id: str, timeout_s: float = 10.0) -> dict[str, Any]:
        """The pending approval opened for ``request_id``, waiting up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            listed = await self.approvals()
            found = [item for item in listed if item["request_id"] == request_id]
            if found:
                return dict(found[0])
            await asyncio.sleep(0.1)
        raise TimeoutError(f"no pending approval for {request_id}")

    async def is_pending(self, request_id: str) -> bool:
        """Whether ``request_id`` has an approval still pending."""
        return any(item["request_id"] == request_id for item in await self.approvals())

    async def decide(self, approver: str, approval_id: str, approve: bool = True) -> dict[str, Any]:
        """Answer an approval as ``approver``; the service's reply."""
        body = {"approval_id": approval_id, "approve": approve}
        return dict(await self.rpc(Rpc.approvals_decide(approver), body, approver=approver))

    async def trail(self, request_id: str) -> list[dict[str, Any]]:
        """The audit records of ``request_id``, in chain order."""
        reply = await self.rpc(Rpc.AUDIT_TRAIL, {"request_id": request_id})
        assert reply["ok"], reply
        return list(reply["records"])

    async def publish_tool(self, descriptor: dict[str, Any]) -> dict[str, Any]:
        """Publish ``descriptor`` over the bus as the operator does: signed with the operator key."""
        key = load_private_key(self.stack.keys_dir("operator") / "operator.key")
        body = {"descriptor": descriptor, "signature": sign_value(descriptor, key)}
        reply = await self.nc.request(Rpc.REGISTRY_PUBLISH, json.dumps(body).encode(), timeout=5)
        return dict(json.loads(reply.data))

    async def publish_raw(self, subject: str, data: bytes, msg_id: str) -> int:
        """Publish raw bytes onto the stream with ``Nats-Msg-Id``; return the stream sequence."""
        ack = await self.js.publish(subject, data, stream=catalog.STREAM, headers={"Nats-Msg-Id": msg_id})
        assert not ack.duplicate, f"{msg_id} was deduplicated"
        return int(ack.seq)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        for nc in self._approvers.values():
            await nc.close()


IN_ALL_EVENTS = 0xFFF
"""Every inotify event (open, access, modify, create, delete, moves, ...); ``IN_MOVED_TO`` is 0x80."""
_EVENT_HEAD = struct.Struct("iIII")


class DirWatch:
    """Linux inotify(7) on directories: every open, read, create, write and rename inside them.

    Used to prove effects: how often a file was replaced (``IN_MOVED_TO``), and that
    nothing outside the sandbox was opened or created.
    """

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._dirs: dict[int, Path] = {}
        self.events: list[tuple[Path, str, int]] = []

    def watch(self, directory: Path) -> None:
        """Watch ``directory`` (not recursive)."""
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), IN_ALL_EVENTS)
        if wd < 0:
            raise OSError(ctypes.get_errno(), f"inotify_add_watch {directory}")
        self._dirs[wd] = directory

    def poll(self) -> list[tuple[Path, str, int]]:
        """Collect pending events; return all events seen so far as ``(dir, name, mask)``."""
        while True:
            try:
                buffer = os.read(self._fd, 65536)
            except BlockingIOError:
                return self.events
            self._parse(buffer)

    def _parse(self, buffer: bytes) -> None:
        offset = 0
        while offset < len(buffer):
            wd, mask, _cookie, length = _EVENT_HEAD.unpack_from(buffer, offset)
            start = offset + _EVENT_HEAD.size
            name = buffer[start : start + length].rstrip(b"\0").decode(errors="replace")
            if wd in self._dirs:
                self.events.append((self._dirs[wd], name, mask))
            offset = start + length

    def count(self, name: str, mask: int) -> int:
        """How many events on ``name`` matched ``mask`` so far."""
        return sum(1 for _, seen, bits in self.poll() if seen == name and bits & mask)

    def close(self) -> None:
        os.close(self._fd)
