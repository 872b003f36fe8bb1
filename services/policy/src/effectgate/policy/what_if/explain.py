"""Why a policy decides a call as it does (``effectgate policy explain``).

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cedarpy

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.annotations import PolicyInfo
from effectgate.policy.cedar.context import Untypable
from effectgate.policy.cedar.engine import PolicyEngine, PolicyOutcome
from effectgate.policy.cedar.outcomes import Evaluation, policy_verdict
from effectgate.policy.cedar.schema import ACTION_APPROVAL, ACTION_EXECUTE
from effectgate.policy.in_force.visibility import hidden_from

__all__ = ["ActionAnswer", "Explanation", "PolicyView", "explain", "policy_sources"]


@dataclass(frozen=True, slots=True)
class PolicyView:
    """One policy as a person reads it.

    Attributes:
        id: its ``@id``.
        effect: ``permit`` or ``forbid``.
        annotations: every annotation (``@id``, ``@reason``, ``@approver_role``, …).
        source: its Cedar text (Cedar's own formatting of it).
    """

    id: str
    effect: str
    annotations: Mapping[str, str]
    source: str


@dataclass(frozen=True, slots=True)
class ActionAnswer:
    """Cedar's answer for one action: allowed, the policies that determined it, evaluation errors."""

    action: str
    allowed: bool
    determining: tuple[PolicyView, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Explanation:
    """How ``engine`` decides one call.

    Attributes:
        version: the engine's policy version.
        verdict: the policy's verdict as a decision records it (``policy_verdict``).
        outcome: the full outcome (reason code, reason, approver role, quorum).
        hidden: no arguments could open the call, so it is denied as if it did not exist.
        context: the Cedar context the rules saw; ``None`` when an argument could not be typed.
        answers: one per action, ``execute`` first.
    """

    version: str
    verdict: Verdict
    outcome: PolicyOutcome
    hidden: bool
    context: dict[str, Any] | None
    answers: tuple[ActionAnswer, ...]


def explain(
    engine: PolicyEngine, principal: str, descriptor: ToolDescriptor, operation: str, arguments: Mapping[str, Any]
) -> Explanation:
    """Explain how ``engine`` decides ``principal`` calling ``descriptor``'s ``operation`` with ``arguments``.

    ``operation`` must be one of the descriptor's operations.
    """
    outcome = engine.decide(principal, descriptor, operation, arguments)
    hidden = hidden_from(engine, principal, descriptor, operation, descriptor.version) is not None
    verdict = Verdict.DENY if hidden else policy_verdict(outcome)
    try:
        context: dict[str, Any] | None = engine.context(descriptor, operation, arguments)
    except Untypable:
        context = None
    answers: tuple[ActionAnswer, ...] = ()
    if context is not None and engine.directory.principal(principal) is not None:
        sources = policy_sources(engine.text, engine.policies)
        evaluations = engine.evaluate(principal, descriptor.name, context)
        answers = tuple(_answer(engine, action, e, sources) for action, e in zip(_ACTIONS, evaluations, strict=True))
    return Explanation(engine.version, verdict, outcome, hidden, context, answers)


_ACTIONS = (ACTION_EXECUTE, ACTION_APPROVAL)


def _answer(engine: PolicyEngine, action: str, evaluation: Evaluation, sources: Mapping[str, str]) -> ActionAnswer:
    infos = engine.policies
    views = tuple(
        PolicyView(info.id, info.effect, dict(info.annotations), sources.get(cedar_id, ""))
        for cedar_id in evaluation.determining
        if (info := infos.get(cedar_id)) is not None
    )
    return ActionAnswer(action, evaluation.allowed, views, evaluation.errors)


def policy_sources(policy_text: str, infos: Mapping[str, PolicyInfo]) -> dict[str, str]:
    """Each policy's Cedar text by Cedar's positional id (``policy<N>``), as Cedar formats it.

    The text is formatted whole (``cedarpy.format_policies``, which keeps comments) and cut
    at blank lines; a policy's text starts at its first annotation (the comment above it is
    not kept) and is found by its unique ``@id``. Cedar keeps no source positions, so a
    policy that cannot be found that way is rendered back from Cedar's JSON form.
    """
    try:
        formatted = cedarpy.format_policies(policy_text)
    except ValueError:
        formatted = policy_text
    chunks = [_from_annotations(chunk) for chunk in re.split(r"\n[ \t]*\n", formatted)]
    sources = {}
    for cedar_id, info in infos.items():
        found = [chunk for chunk in chunks if f"@id({json.dumps(info.id)})" in chunk]
        sources[cedar_id] = found[0] if len(found) == 1 else _rendered(policy_text, cedar_id)
    return sources


def _from_annotations(chunk: str) -> str:
    lines = chunk.strip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.lstrip().startswith("@")), 0)
    return "\n".join(lines[first:])


def _rendered(policy_text: str, cedar_id: str) -> str:
    body = json.loads(cedarpy.policies_to_json_str(policy_text))["staticPolicies"][cedar_id]
    one = {"staticPolicies": {cedar_id: body}, "templates": {}, "templateLinks": []}
    return str(cedarpy.policies_from_json_str(json.dumps(one))).strip()
