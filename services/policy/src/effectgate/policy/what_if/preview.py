"""Whether some arguments could let a principal call an operation: Cedar's partial evaluation.

Asked for what an agent may *see* (:mod:`effectgate.policy.in_force.visibility`), never to
decide a call (cedarpy: partial-evaluation results are a preview). The argument-derived context
is unknown: each of the operation's own typed arguments, ``destination_host`` and ``amount``
(when the operation declares them) are Cedar ``unknown`` values.
"""

from __future__ import annotations

from typing import Any

import cedarpy

from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.policy.cedar.args_schema import CedarType
from effectgate.policy.cedar.context import DERIVED, descriptor_context
from effectgate.policy.cedar.schema import ACTION_APPROVAL, ACTION_EXECUTE

__all__ = ["Preview"]


class Preview:
    """Partial evaluation of one policy set over one set of entities.

    Args:
        policy_set: the parsed policies.
        entities: the agents and tools.
    """

    def __init__(self, policy_set: cedarpy.PolicySet, entities: cedarpy.Entities) -> None:
        self._policy_set, self._entities = policy_set, entities
        self._seen: dict[tuple[str, str, str], bool] = {}

    def may_allow(self, principal: str, descriptor: ToolDescriptor, operation: str, args: CedarType) -> bool:
        """Whether some arguments (typed ``args``, each possibly absent) could let the call happen."""
        key = (principal, descriptor_digest(descriptor), operation)
        if (seen := self._seen.get(key)) is None:
            seen = self._seen[key] = any(
                self._possible(principal, action, descriptor.name, context)
                for context in _contexts(descriptor, operation, args)
                for action in (ACTION_EXECUTE, ACTION_APPROVAL)
            )
        return seen

    def _possible(self, principal: str, action: str, tool: str, context: dict[str, Any]) -> bool:
        request = {
            "principal": f'Agent::"{principal}"',
            "action": f'Action::"{action}"',
            "resource": f'Tool::"{tool}"',
            "context": context,
        }
        try:
            result = cedarpy.is_authorized_partial(request, self._policy_set, self._entities)
        except Exception:  # any engine failure: not shown (the call itself is decided in full)
            return False
        return not result.diagnostics.errors and result.decision is not cedarpy.Decision.Deny


def _contexts(descriptor: ToolDescriptor, operation: str, args: CedarType) -> list[dict[str, Any]]:
    """Every field present; none present; and every field present but one (each in turn)."""
    spec = descriptor.operations[operation]
    known = descriptor_context(descriptor.name, descriptor.version, operation, spec)
    present = {name: _unknown(f"args.{name}") for name, _ in args.attributes}
    derived = {name: _unknown(name) for name, field in DERIVED.items() if getattr(spec, field)}
    contexts = [{**known, "args": present, **derived}, {**known, "args": {}}]
    contexts += [{**known, "args": _without(present, name), **derived} for name in present]
    contexts += [{**known, "args": present, **_without(derived, name)} for name in derived]
    return contexts


def _without(fields: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if key != name}


def _unknown(name: str) -> dict[str, Any]:
    """A Cedar partial-evaluation unknown (``unknown("<name>")``)."""
    return {"__extn": {"fn": "unknown", "arg": name}}
