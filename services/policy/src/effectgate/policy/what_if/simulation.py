"""Replaying recorded decisions through a candidate policy: what would change (``effectgate policy simulate``).

Pure: no I/O. The caller reads the audit chain (``tg.audit.export`` records) and the
registry; this module turns records into :class:`Case` values (:func:`cases_from`) and
evaluates each one with a candidate engine (:func:`replay`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from effectgate.contracts.events import DecisionMade, ToolRequested
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.schemas import SchemaUnusable, first_error
from effectgate.contracts.tools.secret_arguments import policy_schema, sealing_problem, secret_arguments
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.outcomes import policy_verdict
from effectgate.policy.in_force.visibility import hidden_from

__all__ = [
    "Call",
    "Case",
    "Change",
    "Recorded",
    "Report",
    "Wanted",
    "call_of",
    "cases_from",
    "recorded",
    "replay",
    "wanted",
]

Wanted = tuple[str, str | None]
"""A descriptor a case needs: ``(tool, version)``; version ``None``: the latest."""

_decision = msgspec.json.Decoder(DecisionMade)
_request = msgspec.json.Decoder(ToolRequested)


@dataclass(frozen=True, slots=True)
class Case:
    """One recorded decision the policy took part in, and the call it decided.

    Attributes:
        request_id / principal: the request.
        occurred_at: when it was decided.
        tool / version / operation / arguments: the call (``version`` ``None``: the latest).
        before: the recorded ``policy_verdict``.
        before_code: the recorded reason code (``hidden_reason_code`` for a hidden call).
        digest: the descriptor digest the decision bound, when it bound one.
        policy_version: the version that made the decision.
    """

    request_id: str
    principal: str
    occurred_at: datetime
    tool: str
    version: str | None
    operation: str
    arguments: dict[str, Any]
    before: Verdict
    before_code: str
    digest: str | None = None
    policy_version: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """A case the candidate decides otherwise: ``before`` → ``after`` (with the candidate's reason code)."""

    case: Case
    after: Verdict
    after_code: str


@dataclass
class Report:
    """What replaying a window of decisions found.

    Attributes:
        compared: cases evaluated with the candidate.
        changes: the cases whose verdict would change, in decision order.
        not_comparable: reason → how many decisions could not be compared.
    """

    compared: int = 0
    changes: list[Change] = field(default_factory=list)
    not_comparable: Counter[str] = field(default_factory=Counter)


def _decoded(decoder: msgspec.json.Decoder[Any], payload: str) -> Any:
    try:
        return decoder.decode(payload.encode("utf-8", errors="surrogatepass"))
    except (msgspec.DecodeError, UnicodeEncodeError):
        return None


@dataclass
class Recorded:
    """The requests and decisions of an audit log, by ``(principal, request id)``; the first of each counts."""

    requests: dict[tuple[str, str], ToolRequested] = field(default_factory=dict)
    decisions: dict[tuple[str, str], DecisionMade] = field(default_factory=dict)


def recorded(records: Iterable[Mapping[str, Any]]) -> Recorded:
    """Index the ``tool.requested`` and ``decision.made`` records (audit records as JSON objects).

    Only the first decision recorded for a request counts (the first on its subject is the decision).
    """
    found = Recorded()
    for record in records:
        kind, payload = record.get("event_type"), str(record.get("payload", ""))
        if kind == "tool.requested" and (asked := _decoded(_request, payload)) is not None:
            found.requests.setdefault((str(record.get("principal")), asked.request_id), asked)
        elif kind == "decision.made" and (made := _decoded(_decision, payload)) is not None:
            found.decisions.setdefault((made.principal, made.request_id), made)
    return found


def cases_from(records: Iterable[Mapping[str, Any]], since: datetime, report: Report) -> list[Case]:
    """The comparable cases among audit ``records`` decided at or after ``since``; the rest counted in ``report``."""
    found = recorded(records)
    window = [made for made in found.decisions.values() if made.occurred_at >= since]
    return [case for made in window if (case := _case(made, found.requests, report)) is not None]


Call = tuple[str, str | None, str, dict[str, Any], str | None, str]
"""``(tool, version, operation, arguments, descriptor digest, reason code)`` of a recorded decision."""


def _case(made: DecisionMade, requests: Mapping[tuple[str, str], ToolRequested], report: Report) -> Case | None:
    if made.policy_verdict is None:
        report.not_comparable[f"never reached the policy ({made.reason_code})"] += 1
        return None
    if (call := call_of(made, requests)) is None:
        report.not_comparable["its request is not in the audit log"] += 1
        return None
    tool, version, operation, arguments, digest, code = call
    return Case(
        request_id=made.request_id,
        principal=made.principal,
        occurred_at=made.occurred_at,
        tool=tool,
        version=version,
        operation=operation,
        arguments=arguments,
        before=made.policy_verdict,
        before_code=code,
        digest=digest,
        policy_version=made.policy_version,
    )


def call_of(made: DecisionMade, requests: Mapping[tuple[str, str], ToolRequested]) -> Call | None:
    """The call a decision bound, else (a hidden call) the recorded request's."""
    if (bound := made.request) is not None:
        return bound.tool, bound.version, bound.operation, bound.arguments, bound.descriptor_digest, made.reason_code
    if (asked := requests.get((made.principal, made.request_id))) is None:
        return None
    code = made.hidden_reason_code or made.reason_code
    return asked.tool, asked.version, asked.operation, asked.arguments, None, code


def wanted(cases: Iterable[Case]) -> set[Wanted]:
    """The descriptors the cases need, to be read from the registry."""
    return {(case.tool, case.version) for case in cases}


def replay(
    engine: PolicyEngine, cases: Iterable[Case], descriptors: Mapping[Wanted, ToolDescriptor | None], report: Report
) -> Report:
    """Evaluate every case with ``engine``; changes and what could not be compared go into ``report``."""
    for case in cases:
        after = _after(engine, case, descriptors.get((case.tool, case.version)))
        if isinstance(after, str):
            report.not_comparable[after] += 1
            continue
        report.compared += 1
        if after[0] is not case.before:
            report.changes.append(Change(case, *after))
    return report


def _after(engine: PolicyEngine, case: Case, descriptor: ToolDescriptor | None) -> tuple[Verdict, str] | str:
    """The candidate's verdict and reason code, or why the case cannot be compared."""
    if descriptor is None or case.operation not in descriptor.operations:
        return "the tool, version or operation is no longer registered"
    if case.digest is not None and descriptor_digest(descriptor) != case.digest:
        return "the descriptor changed since"
    if engine.directory.principal(case.principal) is None:
        return "the principal is not in the local principal directory"
    if (hidden := hidden_from(engine, case.principal, descriptor, case.operation, case.version)) is not None:
        return Verdict.DENY, hidden.policy.reason_code
    if (problem := _arguments_problem(descriptor, case)) is not None:
        return problem
    outcome = engine.decide(case.principal, descriptor, case.operation, case.arguments)
    return policy_verdict(outcome), outcome.reason_code


def _arguments_problem(descriptor: ToolDescriptor, case: Case) -> str | None:
    """Why the call's arguments would not reach the policy (as the pipeline checks them), else ``None``."""
    schema = descriptor.operations[case.operation].input_schema
    try:
        sealed = sealing_problem(secret_arguments(schema), case.arguments)
        invalid = sealed or first_error(policy_schema(schema), case.arguments)
    except SchemaUnusable:
        return "its input schema cannot be used"
    return "its arguments do not reach the policy (schema)" if invalid else None
