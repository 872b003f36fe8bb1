"""Fixtures: an executor over in-memory ports, with a real sandboxed file system or a scripted tool."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import ApprovalGranted, BoundRequest, DecisionMade, ReceiptIssued, request_hash
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.contracts.tools.contents import ContentState
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.hosting import CallContext
from effectgate.contracts.vocabulary import Outcome, Verdict
from effectgate.executor.adapters.contents import ContentReader
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.adapters.tool_host import LocalToolHost
from effectgate.executor.background.backstop import Backstop, Deadlines
from effectgate.executor.effects.binding import Guard
from effectgate.executor.effects.claims import DurableClaims
from effectgate.executor.effects.permission import Permission
from effectgate.executor.effects.running import Runner, ToolHost
from effectgate.executor.effects.timing import Timing
from effectgate.executor.memory import InMemoryBus, InMemoryIdempotencyStore
from effectgate.executor.receipts.outlet import ScrubbingBus
from effectgate.executor.service import Executor
from effectgate.executor.verification import Keys
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor

POLICY, APPROVALS = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()


class Clock:
    """A settable clock that starts now (re-check answers are checked against it)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


class Descriptors:
    def __init__(self, *descriptors: ToolDescriptor) -> None:
        self.by_name = {d.name: d for d in descriptors}

    async def get(self, tool: str, version: str | None = None) -> ToolDescriptor | None:
        return self.by_name.get(tool)

    async def list(self) -> list[ToolDescriptor]:
        return sorted(self.by_name.values(), key=lambda d: d.name)


def answer_with(
    allowed: bool, code: str = "still_allowed", key: Ed25519PrivateKey = POLICY, retry_after_s: float | None = None
) -> Any:
    def answer(query: RecheckQuery) -> RecheckAnswer:
        reply = RecheckAnswer(
            request_hash=query.request_hash,
            allowed=allowed,
            reason_code=code,
            reason=code.replace("_", " "),
            checked_at=datetime.now(UTC),
            admitted_request_id=query.admit_request_id,
            retry_after_s=retry_after_s,
        )
        return sign_event(reply, key)

    return answer


class Harness:
    """One executor instance, its ports and what it published.

    ``sandbox``: the file root its content reader sees (``None``: it sees no files).
    """

    def __init__(
        self,
        descriptor: ToolDescriptor,
        tools: ToolHost,
        instance: str = "exec-1",
        known_secrets: tuple[str, ...] = (),
        sandbox: Path | None = None,
        **timing: Any,
    ) -> None:
        self.descriptor, self.clock = descriptor, Clock()
        self.store, self.bus = InMemoryIdempotencyStore(), InMemoryBus(answer=answer_with(True))
        self.outlet = ScrubbingBus(self.bus, Redactor(find_secrets, known_secrets))
        self.timing = Timing(**timing)
        self.reader = ContentReader({"file_system": sandbox} if sandbox else {})
        self.runner = Runner(
            tools, self.outlet, self.clock, inline_result_bytes=2048, max_result_bytes=65536, contents=self.reader
        )
        self.executor = self.new_instance(instance)
        self.backstop = Backstop(
            self.executor, self.outlet, self.store, self.keys, self.clock, self.timing, Deadlines(60, 10, 300)
        )

    @property
    def keys(self) -> Keys:
        return Keys(policy=POLICY.public_key(), approvals=APPROVALS.public_key())

    def new_instance(self, instance: str) -> Executor:
        """Another executor process on the same store and stream."""
        return Executor(
            store=self.store,
            bus=self.outlet,
            descriptors=Descriptors(self.descriptor),
            runner=self.runner,
            permission=Permission(self.outlet, POLICY.public_key(), self.clock, self.timing),
            claims=DurableClaims(self.outlet, self.store, self.clock, instance, self.timing.idempotency_ttl_s),
            keys=self.keys,
            clock=self.clock,
            instance=instance,
            timing=self.timing,
        )

    @property
    def receipts(self) -> list[ReceiptIssued]:
        return list(self.bus.receipts.values())

    def receipt(self, rid: str) -> tuple[Outcome, str]:
        issued = self.bus.receipts[rid]
        return issued.outcome, issued.reason_code

    def decision(
        self,
        operation: str,
        arguments: dict[str, Any],
        rid: str = "r1",
        key: str = "k1",
        verdict: Verdict = Verdict.EXECUTE,
        age_s: float = 0.0,
    ) -> DecisionMade:
        bound = BoundRequest(
            principal="demo-agent",
            tool=self.descriptor.name,
            version=self.descriptor.version,
            descriptor_digest=descriptor_digest(self.descriptor),
            operation=operation,
            arguments=arguments,
        )
        decision = DecisionMade(
            event_id=f"decision:{rid}",
            occurred_at=self.clock() - timedelta(seconds=age_s),
            request_id=rid,
            principal="demo-agent",
            verdict=verdict,
            reason_code="x",
            reason="x",
            idempotency_key=key,
            request=bound,
            request_hash=request_hash(bound),
            side_effect_class=self.descriptor.operations[operation].side_effect_class,
            timeout_s=self.descriptor.timeout_s,
        )
        signed = sign_event(decision, POLICY)
        self.bus.decisions[rid] = signed
        return signed

    answer_with = staticmethod(answer_with)
    policy_key, approvals_key = POLICY, APPROVALS

    def read_contents(self, decision: DecisionMade) -> tuple[ContentState, ...]:
        """What the decided call's file references name now (what the approvals service binds)."""
        assert decision.request is not None
        return self.reader.read(self.descriptor, decision.request.operation, decision.request.arguments)

    def grant(
        self,
        decision: DecisionMade,
        digest: str | None = None,
        ttl_s: float = 60,
        key: Ed25519PrivateKey = APPROVALS,
        contents: tuple[ContentState, ...] | None = None,
    ) -> ApprovalGranted:
        """A grant of ``decision`` binding ``contents`` (default: what its references name now)."""
        grant = ApprovalGranted(
            event_id=f"g-{decision.request_id}",
            occurred_at=self.clock(),
            request_id=decision.request_id,
            principal=decision.principal,
            approval_id="ap-1",
            request_hash=digest or decision.request_hash or "",
            approver="alice",
            expires_at=self.clock() + timedelta(seconds=ttl_s),
            contents=self.read_contents(decision) if contents is None else contents,
        )
        return sign_event(grant, key)


class ScriptedTool:
    """A tool host whose one operation does what the test says (``behave``), counting calls."""

    def __init__(self, behave: Callable[[dict[str, Any]], Any]) -> None:
        self.behave, self.calls = behave, 0
        self.contexts: list[CallContext | None] = []

    async def call(
        self,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Guard | None = None,
        *,
        context: CallContext | None = None,
    ) -> Any:
        if guard is not None:
            guard()  # as an adapter does, right before the effect
        self.calls += 1
        self.contexts.append(context)
        result = self.behave(arguments)
        if hasattr(result, "__await__"):
            return await result
        return result


def _file_system(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    root = tmp_path / "sandbox"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    return root


@pytest.fixture
def harness(repo_root: Path, sandbox: Path) -> Harness:
    """An executor on the real ``file_system`` tool, rooted at ``sandbox``."""
    return Harness(_file_system(repo_root), LocalToolHost(FileSystemTool(sandbox), None), sandbox=sandbox)


@pytest.fixture
def scripted(repo_root: Path) -> Callable[..., tuple[Harness, ScriptedTool]]:
    """``scripted(behave, **timing)``: an executor whose file_system operations run ``behave(arguments)``."""

    def make(behave: Callable[[dict[str, Any]], Any], **timing: Any) -> tuple[Harness, ScriptedTool]:
        tool = ScriptedTool(behave)
        return Harness(_file_system(repo_root), tool, **timing), tool

    return make


@pytest.fixture
def harness_of() -> Callable[[ToolDescriptor, ToolHost], Harness]:
    """``harness_of(descriptor, tools)``: an executor calling ``descriptor``'s tool on ``tools``."""
    return Harness
