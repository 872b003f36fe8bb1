"""The executor ↔ tool worker protocol: Python tools served on the bus (``python:<worker>`` adapters).

The executor sends one signed :class:`WorkerCall` per attempt to ``tg.worker.<worker>.call.<tool>``
(core NATS request/reply; the workers of one name share a queue group, so they scale out). A
worker answers with one :class:`WorkerAnswer`; while a streaming operation runs it publishes
:class:`WorkerProgress` on the call's ``progress`` subject. Each worker instance announces what
it serves with :class:`WorkerAlive` on ``tg.worker.<worker>.alive`` every
:data:`ALIVE_INTERVAL_S`; the executor marks a tool ``unavailable`` when no instance announced
it within :data:`ALIVE_TTL_S`, or when the digest announced differs from the published one.

Nothing in :class:`CallContext` comes from the request body: the executor fills it from the
signed decision, the approval it verified and its own clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from effectgate.contracts.bus.catalog import token_of
from effectgate.contracts.events import Resolution

__all__ = [
    "ALIVE_INTERVAL_S",
    "ALIVE_TTL_S",
    "ANSWERS",
    "CallContext",
    "CallProgress",
    "ReconcileAnswer",
    "ServedTool",
    "WorkerAlive",
    "WorkerAnswer",
    "WorkerCall",
    "WorkerProgress",
    "WorkerSubjects",
]

ALIVE_INTERVAL_S: Final = 2.0
"""How often a worker instance announces itself, seconds."""

ALIVE_TTL_S: Final = 6.0
"""How long an announcement counts, seconds: three intervals, so one lost announcement is no outage."""

AnswerKind = Literal["ok", "refused", "failed", "uncertain"]
ANSWERS: Final = ("ok", "refused", "failed", "uncertain")
"""What a worker's answer may say: ``ok`` (the result), ``refused`` (nothing ran, never retried),
``failed`` (it did not do its effect; ``retryable`` says whether a retry may help), ``uncertain``
(a write whose effect may have happened)."""


class CallContext(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Who is asking, as the executor vouches for it (never from the request body).

    Attributes:
        principal / request_id / idempotency_key: the request's, from the signed decision.
        approval_id / approvers: the approval the call runs on, when it needed one.
        policy_version: the policy version of the decision.
        deadline: when the call's timeout ends, UTC.
        traceparent / tracestate: the W3C Trace Context of the executor's run span.
    """

    principal: str
    request_id: str
    idempotency_key: str
    deadline: datetime
    approval_id: str | None = None
    approvers: tuple[str, ...] = ()
    policy_version: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None


class WorkerCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One attempt of one operation, signed by the executor (``signature`` over the other fields).

    Attributes:
        call_id: unique per attempt.
        tool / version / descriptor_digest: the published descriptor the decision bound.
        operation / arguments: what runs (secrets unsealed, still never logged).
        context: :class:`CallContext`.
        attempt: 1 for the first call, then 2, … (retries of READ_ONLY and idempotent writes only).
        progress: the subject :class:`WorkerProgress` goes to, for a streaming operation.
        signature: Ed25519 by the executor key (``contracts.integrity.signing.sign_event``).
    """

    call_id: str
    tool: str
    version: str
    descriptor_digest: str
    operation: str
    arguments: dict[str, Any]
    context: CallContext
    attempt: int = 1
    progress: str | None = None
    signature: str = ""


class WorkerAnswer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A worker's answer to one :class:`WorkerCall`.

    Attributes:
        call_id: the call's.
        outcome: one of :data:`ANSWERS`.
        reason_code / reason: why, for every outcome but ``ok`` (scrubbed of the tool's secrets).
        result: the operation's result (a streaming one: the array of its items).
        effect_id: the target system's id for what the call did (a payment id, a commit sha).
        retryable: ``failed`` only: a transient fault, which the retry policy may retry.
        worker / instance: who answered.
    """

    call_id: str
    outcome: AnswerKind
    reason_code: str = "ok"
    reason: str = ""
    result: Any = None
    effect_id: str | None = None
    retryable: bool = False
    worker: str = ""
    instance: str = ""


class WorkerProgress(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How far a streaming call is: ``items`` yielded so far (the items themselves come with the answer)."""

    call_id: str
    items: int
    message: str = ""


class CallProgress(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the executor relays of a :class:`WorkerProgress` on ``tg.progress.<principal>.<request_id>``."""

    request_id: str
    items: int
    message: str = ""


class ReconcileAnswer(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The result a reconcile operation returns (its output schema is this struct's JSON Schema).

    Attributes:
        resolution: ``ran``, ``not_run`` or ``unknown`` (``contracts.events.Resolution``).
        effect_id: the target's id for the effect, when it ran.
        note: what the target said, for the operator.
    """

    resolution: Resolution
    effect_id: str | None = None
    note: str = ""


class ServedTool(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One tool a worker instance serves: its declaration's name, version and descriptor digest."""

    tool: str
    version: str
    digest: str


class WorkerAlive(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A worker instance's announcement: who it is and what it serves, now."""

    worker: str
    instance: str
    tools: tuple[ServedTool, ...]
    at: datetime
    stopping: bool = False


class WorkerSubjects:
    """The subjects of the protocol; ``worker`` matches ``adapters.SERVER_NAME``, ``tool`` ``TOOL_NAME``."""

    ALIVE: Final = "tg.worker.*.alive"
    """Every worker's announcements (core NATS; the executor subscribes)."""

    @staticmethod
    def call(worker: str, tool: str) -> str:
        """``tg.worker.<worker>.call.<tool>``: the executor's :class:`WorkerCall` (request/reply)."""
        return f"tg.worker.{worker}.call.{tool}"

    @staticmethod
    def calls(worker: str) -> str:
        """``tg.worker.<worker>.call.*``: what a worker subscribes to, in the queue group :meth:`queue`."""
        return f"tg.worker.{worker}.call.*"

    @staticmethod
    def queue(worker: str) -> str:
        """The queue group of the workers named ``worker``."""
        return f"worker-{worker}"

    @staticmethod
    def alive(worker: str) -> str:
        """``tg.worker.<worker>.alive``: :class:`WorkerAlive`."""
        return f"tg.worker.{worker}.alive"

    @staticmethod
    def progress(worker: str, call_id: str) -> str:
        """``tg.worker.<worker>.progress.<call_id>``: :class:`WorkerProgress` of one streaming call."""
        return f"tg.worker.{worker}.progress.{call_id}"

    @staticmethod
    def worker_of_alive(subject: str) -> str | None:
        """The ``<worker>`` token of an :meth:`alive` subject; ``None`` for another subject."""
        return token_of(WorkerSubjects.ALIVE, subject)

    @staticmethod
    def tool_of_call(worker: str, subject: str) -> str | None:
        """The ``<tool>`` token of a :meth:`call` subject of ``worker``; ``None`` for another subject."""
        return token_of(WorkerSubjects.calls(worker), subject)
