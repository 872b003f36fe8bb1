"""What a tool's parameters may ask for besides its arguments, and what it may return.

A parameter annotated :class:`Context` receives who is calling; one annotated :class:`Secrets`
the tool's secrets; one annotated ``Provided[T]`` the host's ``T`` (:mod:`effectgate.tools.dependencies`).
None of them is an argument: none enters the input schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Generic, TypeVar

from effectgate.contracts.tools.hosting import ReconcileAnswer, WorkerCall

__all__ = ["Context", "Effect", "Provided", "Reconciled", "Secrets"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Context:
    """Who is asking, as the executor vouches for it (``contracts.tools.hosting.CallContext``).

    Attributes:
        tool / operation / call_id / attempt: what runs (``attempt`` 1 for the first call).
        principal / request_id / idempotency_key: the request's, from the signed decision.
        approval_id / approvers: the approval the call runs on, when it needed one.
        policy_version: the policy version of the decision.
        deadline: when the call's timeout ends (UTC); the dispatcher enforces it.
        traceparent: the W3C Trace Context of the executor's run span, when traced.
    """

    tool: str
    operation: str
    call_id: str
    attempt: int
    principal: str
    request_id: str
    idempotency_key: str
    deadline: datetime
    approval_id: str | None = None
    approvers: tuple[str, ...] = ()
    policy_version: str | None = None
    traceparent: str | None = None

    @classmethod
    def of(cls, call: WorkerCall) -> Context:
        """The context of ``call``: its signed :class:`~effectgate.contracts.tools.hosting.CallContext`."""
        given = call.context
        return cls(
            tool=call.tool,
            operation=call.operation,
            call_id=call.call_id,
            attempt=call.attempt,
            principal=given.principal,
            request_id=given.request_id,
            idempotency_key=given.idempotency_key,
            deadline=given.deadline,
            approval_id=given.approval_id,
            approvers=given.approvers,
            policy_version=given.policy_version,
            traceparent=given.traceparent,
        )


class Secrets(Mapping[str, str]):
    """The secret values of one call, by name: only the names the tool declared, resolved at call time."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Secrets({sorted(self._values)})"


@dataclass(frozen=True)
class Effect(Generic[T]):
    """A write's result with the target system's id for what it did (a payment id, a commit sha).

    Annotate the return ``Effect[T]``: the output schema is ``T``'s, the answer's ``effect_id`` this id.
    """

    result: T
    effect_id: str | None = None


Reconciled = ReconcileAnswer
"""What a reconcile operation returns: ``ran`` / ``not_run`` / ``unknown`` (``contracts.tools.hosting``)."""


class _ProvidedMarker:
    """Marks a parameter the host's dependencies fill (``Annotated[T, PROVIDED]``)."""

    def __repr__(self) -> str:
        return "PROVIDED"


PROVIDED = _ProvidedMarker()
Provided = Annotated[T, PROVIDED]
"""``Provided[Ledger]``: a parameter the host's :class:`~effectgate.tools.Dependencies` fill with a ``Ledger``."""
