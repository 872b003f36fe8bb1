"""On a real nats-server that carries at most 64 KiB a message, and a real Redis index, every call whose
receipt grew past that ends in exactly one receipt: stored in the stream, kept in the index, verified by
the agent's SDK, which reads the whole reason, redactions and result back from out of band."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from nats.aio.client import Client

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import BoundRequest, DecisionMade, request_hash
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.devstack.records_reading import records_answered
from effectgate.devstack.servers import ServerProcess, nats_server
from effectgate.executor.adapters.contents import ContentReader
from effectgate.executor.adapters.redis_idempotency import RedisIdempotencyStore
from effectgate.executor.adapters.stream import StreamBus
from effectgate.executor.effects.claims import DurableClaims
from effectgate.executor.effects.permission import Permission
from effectgate.executor.effects.running import Runner
from effectgate.executor.effects.timing import Timing
from effectgate.executor.errors import ToolFailed
from effectgate.executor.receipts.outlet import ScrubbingBus
from effectgate.executor.service import Executor
from effectgate.executor.verification import Keys
from effectgate.sdk import ToolClient
from effectgate.sdk.receipts import ReceiptVerifier
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor
from effectgate.shared.stores.idempotency import EPOCH_KEY
from effectgate.shared.stores.provision import ensure_bus
from effectgate.shared.stores.stream import next_message

pytestmark = pytest.mark.connected

MAX_PAYLOAD = 65_536
CONFIGURED = "Op3rator-Only-Credential"
POLICY, APPROVALS, RECEIPTS = (Ed25519PrivateKey.generate() for _ in range(3))
ITEMS = [{"id": f"order-{n:06d}", "qty": n} for n in range(40_000)]
"""The 40,000 items of an argument set, echoed back: about 1.1 MB of JSON."""
ECHOED = f"Error: no such orders {msgspec.json.encode(ITEMS).decode()}"


@pytest.fixture
def small_nats(tmp_path: Path) -> Iterator[ServerProcess]:
    config = tmp_path / "nats.conf"
    config.write_text(f"max_payload: {MAX_PAYLOAD}\n")
    with nats_server(tmp_path / "nats", config=config) as server:
        yield server


@pytest_asyncio.fixture
async def nc(small_nats: ServerProcess) -> AsyncIterator[Client]:
    connection = await nats.connect(small_nats.url)
    await ensure_bus(connection.jetstream())
    yield connection
    await connection.close()


class _Tool:
    def __init__(self) -> None:
        self.behave: Any = None
        self.calls = 0

    async def call(
        self, descriptor: ToolDescriptor, operation: str, arguments: dict[str, Any], guard: Any = None, **_: Any
    ) -> Any:
        self.calls += 1
        return self.behave(arguments)


class _Descriptors:
    def __init__(self, descriptor: ToolDescriptor) -> None:
        self.descriptor = descriptor

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return self.descriptor

    async def list(self) -> list[ToolDescriptor]:
        return [self.descriptor]


@dataclass
class Stack:
    executor: Executor
    tool: _Tool
    descriptor: ToolDescriptor
    agent: ToolClient
    nc: Client
    principal: str

    def decision(self, rid: str, operation: str, arguments: dict[str, Any], **more: Any) -> DecisionMade:
        bound = BoundRequest(
            principal=self.principal,
            tool=self.descriptor.name,
            version=self.descriptor.version,
            descriptor_digest=descriptor_digest(self.descriptor),
            operation=operation,
            arguments=arguments,
        )
        fields: dict[str, Any] = {"verdict": Verdict.EXECUTE, "reason_code": "permitted", "reason": "ok", **more}
        decision = DecisionMade(
            event_id=f"decision:{rid}",
            occurred_at=datetime.now(UTC),
            request_id=rid,
            principal=self.principal,
            idempotency_key=f"key-{operation}",
            request=bound,
            request_hash=request_hash(bound),
            side_effect_class=self.descriptor.operations[operation].side_effect_class,
            timeout_s=self.descriptor.timeout_s,
            **fields,
        )
        return sign_event(decision, POLICY)

    async def messages_on(self, request_id: str) -> int:
        subject, seq, found = Subjects.receipt(self.principal, request_id), 1, 0
        while (message := await next_message(self.nc.jetstream(), subject, seq)) is not None:
            seq, found = message.seq + 1, found + 1
        return found


@pytest_asyncio.fixture
async def stack(nc: Client, redis_client: aioredis.Redis, repo_root: Path, ns: str) -> AsyncIterator[Stack]:
    await redis_client.set(EPOCH_KEY, "test")
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    js, tool, timing = nc.jetstream(), _Tool(), Timing()
    outlet = ScrubbingBus(StreamBus(nc, js, RECEIPTS), Redactor(find_secrets, [CONFIGURED]))
    store = RedisIdempotencyStore(redis_client)

    def clock() -> datetime:
        return datetime.now(UTC)

    executor = Executor(
        store=store,
        bus=outlet,
        descriptors=_Descriptors(descriptor),
        runner=Runner(
            tool, outlet, clock, inline_result_bytes=262_144, max_result_bytes=2**26, contents=ContentReader({})
        ),
        permission=Permission(outlet, POLICY.public_key(), clock, timing),
        claims=DurableClaims(outlet, store, clock, "exec-1", timing.idempotency_ttl_s),
        keys=Keys(policy=POLICY.public_key(), approvals=APPROVALS.public_key()),
        clock=clock,
        instance="exec-1",
        timing=timing,
    )
    agent = ToolClient(nc, f"agent-{ns}", ReceiptVerifier(RECEIPTS.public_key()))
    async with records_answered(nc):  # the agent reads kept details back as from the executor
        yield Stack(executor, tool, descriptor, agent, nc, f"agent-{ns}")


WRITE = ("write", {"path": "a.txt", "content": "x"})


def _raise(error: BaseException) -> Any:
    def behave(arguments: dict[str, Any]) -> Any:
        raise error

    return behave


@pytest.mark.parametrize(
    ("behave", "call", "outcome", "code"),
    [
        (_raise(ToolFailed("tool_error", ECHOED)), WRITE, "failed", "tool_error"),
        (lambda arguments: ITEMS, ("read", {"path": "a.txt"}), "failed", "output_invalid"),
    ],
    ids=["tool-error-echo", "output-invalid-echo"],
)
async def test_a_reason_over_the_message_limit_ends_in_one_receipt_whose_whole_reason_the_agent_reads(
    stack: Stack, behave: Any, call: tuple[str, dict[str, Any]], outcome: str, code: str
) -> None:
    stack.tool.behave = behave
    await stack.executor.on_decision(stack.decision("r1", *call))
    receipt = await stack.agent.receipt("r1", timeout_s=5)
    assert (receipt.outcome, receipt.reason_code, stack.tool.calls) == (outcome, code, 1)
    assert receipt.detail_ref is not None and "order-039999" in receipt.reason and len(receipt.reason) > MAX_PAYLOAD
    assert await stack.messages_on("r1") == 1
    await stack.executor.on_decision(stack.decision("r2", *call))
    replay = await stack.agent.receipt("r2", timeout_s=5)
    assert (replay.outcome, replay.replay_outcome, replay.reason) == (Outcome.REPLAYED, outcome, receipt.reason)
    assert stack.tool.calls == 1, "the replay came from the index: the tool ran once"


async def test_a_redactions_list_over_the_message_limit_is_read_back_whole(stack: Stack) -> None:
    entries = [{"name": f"{n}-{CONFIGURED}", "kind": "file", "size_bytes": n} for n in range(4_000)]
    stack.tool.behave = lambda arguments: {"path": ".", "entries": entries}
    await stack.executor.on_decision(stack.decision("r1", "list", {"path": "."}))
    receipt = await stack.agent.receipt("r1", timeout_s=5)
    assert receipt.outcome is Outcome.SUCCEEDED and receipt.redactions is not None and len(receipt.redactions) == 4_000
    assert receipt.result is not None and len(receipt.result["entries"]) == 4_000
    assert CONFIGURED not in msgspec.json.encode(receipt).decode() and await stack.messages_on("r1") == 1


async def test_an_inline_result_over_the_message_limit_is_kept_out_of_band(stack: Stack) -> None:
    listing = {"path": ".", "entries": [{"name": f"f{n:05d}", "kind": "file", "size_bytes": n} for n in range(3_000)]}
    stack.tool.behave = lambda arguments: listing
    await stack.executor.on_decision(stack.decision("r1", "list", {"path": "."}))
    receipt = await stack.agent.receipt("r1", timeout_s=5)
    assert (receipt.outcome, receipt.result) == (Outcome.SUCCEEDED, listing) and receipt.result_ref is not None
    assert await stack.messages_on("r1") == 1


async def test_a_denial_whose_reason_is_over_the_message_limit_is_issued(stack: Stack) -> None:
    reason = f"arguments invalid at /items: {ECHOED}"
    await stack.executor.on_decision(stack.decision("r1", *WRITE, verdict=Verdict.DENY, reason_code="x", reason=reason))
    receipt = await stack.agent.receipt("r1", timeout_s=5)
    assert (receipt.outcome, receipt.reason) == (Outcome.DENIED, reason) and stack.tool.calls == 0
    stored = await stack.nc.jetstream().get_last_msg(catalog.STREAM, Subjects.receipt(stack.principal, "r1"))
    assert len(stored.data or b"") < MAX_PAYLOAD


async def test_a_whole_reason_that_can_no_longer_be_read_leaves_the_cut_one(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    stack.tool.behave = _raise(ToolFailed("tool_error", ECHOED))
    await stack.executor.on_decision(stack.decision("r1", *WRITE))
    await stack.nc.jetstream().purge_stream(catalog.RESULTS_STREAM)
    receipt = await stack.agent.receipt("r1", timeout_s=5)
    assert receipt.outcome is Outcome.FAILED and receipt.detail_ref is not None
    assert receipt.reason.startswith("Error: no such orders") and "kept whole with detail_ref" in receipt.reason
    assert "its whole reason cannot be read" in caplog.text
