"""Only the policies that can apply to a call's tool and action are handed to Cedar.

Pure. Cedar evaluates a policy as its scope (``principal``, ``action``, ``resource``
constraints) *and* its conditions, the scope first and short-circuited: a policy whose
scope does not match the request is neither satisfied nor evaluated, so it can neither
permit, forbid, determine a decision nor raise an evaluation error
(https://docs.cedarpolicy.com/policies/syntax-policy.html). Leaving such policies out
gives Cedar's exact answer: the same decision (forbid overrides permit), the same
determining policies and the same errors, at the cost of the policies that remain.

The scopes are read from Cedar's own JSON form of the policies
(``cedarpy.policies_to_json_str``), never from the text:

- ``resource == Tool::"x"`` and ``resource in Tool::"x"`` apply to tool ``x`` only
  (``Tool`` entities have no parents: :mod:`toolgate.policy.entities`); any other
  resource constraint (none, ``is Tool``, ...) applies to every tool;
- ``action == Action::"a"`` and ``action in [Action::"a", ...]`` apply to the actions
  named (the generated schema declares no action groups: :mod:`toolgate.policy.cedar_schema`);
  no action constraint applies to every action.

The policies of a ``(tool, action)`` keep Cedar's positional ids (``policy<N>``: the JSON
form is keyed by them), so diagnostics name them as the whole set would. The subsets are
built when first asked and kept for the engine's life (one engine per policy version);
calls sharing a subset share one ``cedarpy.PolicySet``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import cedarpy

__all__ = ["Scope", "ScopedPolicies", "scope_of"]


@dataclass(frozen=True, slots=True)
class Scope:
    """The tools and actions a policy can apply to (``None``: any)."""

    tools: frozenset[str] | None
    actions: frozenset[str] | None

    def admits(self, tool: str, action: str) -> bool:
        """Whether a request for ``tool`` and ``action`` can match the policy's scope."""
        return (self.tools is None or tool in self.tools) and (self.actions is None or action in self.actions)


def scope_of(policy: dict[str, Any]) -> Scope:
    """The scope of one policy in Cedar's JSON form (the module's rules)."""
    return Scope(_tools(policy.get("resource", {})), _actions(policy.get("action", {})))


def _tools(constraint: dict[str, Any]) -> frozenset[str] | None:
    entity = constraint.get("entity") or {}
    if constraint.get("op") in ("==", "in") and entity.get("type") == "Tool" and "id" in entity:
        return frozenset((entity["id"],))
    return None


def _actions(constraint: dict[str, Any]) -> frozenset[str] | None:
    op = constraint.get("op")
    entities = constraint.get("entities") or ([constraint["entity"]] if "entity" in constraint else [])
    if op not in ("==", "in") or not entities or any(e.get("type") != "Action" or "id" not in e for e in entities):
        return None
    return frozenset(e["id"] for e in entities)


class ScopedPolicies:
    """The policy set of each ``(tool, action)``: the policies whose scope can match it.

    Args:
        policy_text: Cedar policies (static ones; templates are refused before).

    Raises:
        ValueError: the text does not parse (checked before by the engine).
    """

    _MAX_KEYS = 65_536
    """Bound on remembered ``(tool, action)`` keys; past it the map starts again (sets stay shared)."""

    def __init__(self, policy_text: str) -> None:
        document = json.loads(cedarpy.policies_to_json_str(policy_text))
        self._policies: dict[str, dict[str, Any]] = document.get("staticPolicies", {})
        self._scopes = {cedar_id: scope_of(body) for cedar_id, body in self._policies.items()}
        self._by_key: dict[tuple[str, str], cedarpy.PolicySet] = {}
        self._by_ids: dict[tuple[str, ...], cedarpy.PolicySet] = {}

    def ids_for(self, tool: str, action: str) -> tuple[str, ...]:
        """Cedar ids of the policies that can apply to ``tool`` and ``action`` (their order means nothing to Cedar)."""
        return tuple(cedar_id for cedar_id, scope in self._scopes.items() if scope.admits(tool, action))

    def for_call(self, tool: str, action: str) -> cedarpy.PolicySet:
        """The policy set Cedar evaluates for a request on ``tool`` with ``action``."""
        found = self._by_key.get((tool, action))
        if found is None:
            if len(self._by_key) >= self._MAX_KEYS:
                self._by_key.clear()
            found = self._by_key[(tool, action)] = self._set_of(self.ids_for(tool, action))
        return found

    def _set_of(self, ids: tuple[str, ...]) -> cedarpy.PolicySet:
        if (shared := self._by_ids.get(ids)) is None:
            subset = {"staticPolicies": {i: self._policies[i] for i in ids}, "templates": {}, "templateLinks": []}
            shared = self._by_ids[ids] = cedarpy.PolicySet.from_json_str(json.dumps(subset))
        return shared
