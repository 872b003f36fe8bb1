"""The Cedar entities of a policy: one ``Agent`` per principal, one ``Tool`` per tool with attributes.

``Agent::"<principal>"`` carries ``autonomy`` and ``roles`` from the principal directory and
the declared attributes from the attributes file; ``Tool::"<name>"`` carries its declared
attributes. Cedar checks every value against the generated schema
(``cedarpy.Entities.from_json_str`` with the schema). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import cedarpy
import msgspec

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.errors import PolicyInvalid

__all__ = ["entities", "entities_digest", "strangers"]


def entities_digest(directory: PrincipalDirectory, attributes: Attributes) -> str:
    """``sha256:<hex>`` of what a decision reads of the principal directory and the attributes.

    Hashed: every agent (autonomy, roles, operator, attributes), every approver's roles, every
    tool's attributes and every declared attribute type, as JSON with sorted keys. Files that
    say the same give the same digest, whatever their layout and comments; chat identities,
    which no decision reads, are left out. ``effectgate policy explain`` compares the digest a
    decision carries with that of the files it reads.
    """
    agents = {
        name: {
            "autonomy": agent.autonomy,
            "roles": sorted(agent.roles),
            "operator": agent.operator,
            "attributes": dict(attributes.agents.get(name, {})),
        }
        for name, agent in directory.principals.items()
    }
    read = {
        "agents": agents,
        "approvers": {name: sorted(roles) for name, roles in directory.approvers.items()},
        "tools": {name: dict(values) for name, values in attributes.tools.items()},
        "agent_types": dict(attributes.agent_types),
        "tool_types": dict(attributes.tool_types),
    }
    return "sha256:" + hashlib.sha256(msgspec.json.encode(read, order="sorted")).hexdigest()


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
