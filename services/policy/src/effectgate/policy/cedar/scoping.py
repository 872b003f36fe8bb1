"""Only the policies that can apply to a call's tool and action are handed to Cedar.

Pure.
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
