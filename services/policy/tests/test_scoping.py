"""Cedar over only the policies that can apply to a tool and action answers exactly as over the whole set.

Property-style: random policy sets of many rules (every scope form, permits and forbids,
conditions that hold, fail or raise an evaluation error) and random requests, each
evaluated over the whole set and over the subset for its tool and action: same decision,
same determining policies, same errors.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import cedarpy
import msgspec
import pytest

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.cedar.scoping import ScopedPolicies, scope_of

TOOLS = [f"t{n}" for n in range(8)]
ACTIONS = ["execute", "execute_with_approval"]
RESOURCES = ["resource", 'resource == Tool::"{t}"', 'resource in Tool::"{t}"', "resource is Tool"]
SCOPED_ACTIONS = [
    "action",
    'action == Action::"execute"',
    'action == Action::"execute_with_approval"',
    'action in [Action::"execute", Action::"execute_with_approval"]',
    'action in [Action::"execute"]',
    'action in Action::"execute_with_approval"',
]
CONDITIONS = ["", "when { context.n > {k} }", "unless { context.n == {k} }", 'when { context.s == "x{k}" }']


def _policy(rng: random.Random, n: int) -> str:
    forbid = rng.random() < 0.15  # a forbid always has a condition and names one tool: some calls are allowed
    resources = RESOURCES[1:3] if forbid else RESOURCES
    resource = rng.choice(resources).replace("{t}", rng.choice(TOOLS))
    condition = rng.choice(CONDITIONS[1:] if forbid else CONDITIONS).replace("{k}", str(rng.randrange(4)))
    effect = "forbid" if forbid else "permit"
    return f'@id("p{n}")\n{effect}(principal, {rng.choice(SCOPED_ACTIONS)}, {resource}) {condition};\n'


def _request(rng: random.Random) -> dict[str, Any]:
    context = {"n": rng.choice([0, 1, 2, 3, "text"]), "s": rng.choice(["x0", "x1", 7])}  # strings / ints: errors
    tool = rng.choice([*TOOLS, "elsewhere"])
    return {
        "principal": {"type": "Agent", "id": "a"},
        "action": {"type": "Action", "id": rng.choice(ACTIONS)},
        "resource": {"type": "Tool", "id": tool},
        "context": context,
    }


def _answer(result: cedarpy.AuthzResult) -> tuple[bool, list[str], list[str]]:
    diagnostics = result.diagnostics
    return result.allowed, sorted(diagnostics.reasons), sorted(diagnostics.errors)


@pytest.mark.parametrize("seed", range(12))
def test_the_subset_answers_as_the_whole_set(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(_policy(rng, n) for n in range(rng.randrange(50, 400)))
    whole, scoped = cedarpy.PolicySet.from_str(text), ScopedPolicies(text)
    for _ in range(150):
        request = _request(rng)
        tool, action = request["resource"]["id"], request["action"]["id"]
        expected = _answer(cedarpy.is_authorized(request, whole, "[]"))
        assert _answer(cedarpy.is_authorized(request, scoped.for_call(tool, action), "[]")) == expected


def test_a_subset_holds_only_the_policies_whose_scope_can_match() -> None:
    text = "".join(
        [
            '@id("any") permit(principal, action, resource);\n',
            '@id("t0") permit(principal, action, resource == Tool::"t0");\n',
            '@id("t1-ask") permit(principal, action == Action::"execute_with_approval", resource in Tool::"t1");\n',
            '@id("both") forbid(principal, action in [Action::"execute", Action::"execute_with_approval"], resource);',
            '@id("typed") forbid(principal, action == Action::"execute", resource is Tool);\n',
        ]
    )
    scoped = ScopedPolicies(text)
    assert scoped.ids_for("t0", "execute") == ("policy0", "policy1", "policy3", "policy4")
    assert scoped.ids_for("t1", "execute") == ("policy0", "policy3", "policy4")
    assert scoped.ids_for("t1", "execute_with_approval") == ("policy0", "policy2", "policy3")
    assert scoped.for_call("t2", "execute") is scoped.for_call("t3", "execute"), "one set for the same policies"


def test_an_unknown_scope_form_applies_everywhere() -> None:
    unusual = {"op": "is", "entity_type": "Tool", "in": {"entity": {"type": "Tool", "id": "t0"}}}
    assert scope_of({"resource": unusual, "action": {"op": "All"}}).admits("t9", "execute")
    assert scope_of({"resource": {"op": "All"}, "action": {"op": "in", "entities": []}}).admits("t9", "x")


def test_the_engine_names_the_same_policies_with_many_rules(repo_root: Path) -> None:
    descriptor = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)
    policy = repo_root / "deploy/policy"
    engine = load_policy(policy / "policy.cedar", policy / "principals.toml", None, [descriptor])
    context = engine.context(descriptor, "read", {"path": "a.txt"})
    for action in ACTIONS:
        request = {
            "principal": {"type": "Agent", "id": "demo-agent"},
            "action": {"type": "Action", "id": action},
            "resource": {"type": "Tool", "id": descriptor.name},
            "context": json.loads(json.dumps(context)),
        }
        whole = cedarpy.is_authorized(request, engine.text, engine._entities, engine._schema)
        execute, approval = engine.evaluate("demo-agent", descriptor.name, context)
        mine = execute if action == "execute" else approval
        assert (mine.allowed, sorted(mine.determining), sorted(mine.errors)) == _answer(whole)
