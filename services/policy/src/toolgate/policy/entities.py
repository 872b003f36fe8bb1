"""The Cedar entities of a policy: one ``Agent`` per principal, one ``Tool`` per tool with attributes.

``Agent::"<principal>"`` carries ``autonomy`` and ``roles`` from the principal directory and
the declared attributes from the attributes file; ``Tool::"<name>"`` carries its declared
attributes. Cedar checks every value against the generated schema
(``cedarpy.Entities.from_json_str`` with the schema). Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

import cedarpy

from toolgate.contracts.directory import PrincipalDirectory
from toolgate.policy.attributes import Attributes
from toolgate.policy.errors import PolicyInvalid

__all__ = ["entities", "strangers"]


def strangers(directory: PrincipalDirectory, attributes: Attributes) -> list[str]:
    """A note for each agent with attributes that the directory does not hold (its values are unused)."""
    unknown = sorted(set(attributes.agents) - set(directory.principals))
    return [f"attributes: agents.{name} is not in the principal directory, its values are unused" for name in unknown]


def entities(directory: PrincipalDirectory, attributes: Attributes, schema: cedarpy.Schema) -> cedarpy.Entities:
    """The agents of ``directory`` and the tools of ``attributes`` as Cedar entities.

    Raises:
        PolicyInvalid: a value does not fit the schema.
    """
    agents = [_agent(p.name, p.autonomy, sorted(p.roles), attributes) for p in directory.principals.values()]
    tools = [_entity("Tool", name, dict(values)) for name, values in attributes.tools.items()]
    try:
        return cedarpy.Entities.from_json_str(json.dumps([*agents, *tools]), schema)
    except ValueError as exc:
        raise PolicyInvalid(f"principal directory or attributes do not fit the Cedar schema: {exc}") from exc


def _agent(name: str, autonomy: int, roles: list[str], attributes: Attributes) -> dict[str, Any]:
    return _entity("Agent", name, {"autonomy": autonomy, "roles": roles, **attributes.agents.get(name, {})})


def _entity(kind: str, name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    return {"uid": {"type": kind, "id": name}, "attrs": attrs, "parents": []}
