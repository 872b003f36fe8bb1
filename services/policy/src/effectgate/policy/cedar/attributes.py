"""Principal and tool attributes for policies: allow-lists, per-agent limits, tool tags."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effectgate.policy.cedar.context import Untypable, canonical_host, cedar_decimal
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.in_force.files import load_optional

__all__ = ["STANDARD_AGENT_TYPES", "TYPES", "Attributes", "load_attributes", "parse_attributes"]

TYPES = ("String", "Long", "Bool", "decimal", "Set<String>", "Set<Long>")
"""The attribute types a file may declare."""

STANDARD_AGENT_TYPES = {"allowed_hosts": "Set<String>", "max_amount": "decimal"}
"""Agent attributes every schema declares (the shipped policy reads them): the hosts an
agent's open-world reads may reach on their own, and the largest amount it may move."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CEDAR_RESERVED = frozenset({"true", "false", "if", "then", "else", "in", "is", "like", "has", "__cedar"})
"""Cedar's reserved identifiers (https://docs.cedarpolicy.com/policies/syntax-grammar.html)."""

_RESERVED = {"agent": ("autonomy", "roles"), "tool": ()}
_SECTIONS = {"types", "agents", "tools"}


@dataclass(frozen=True, slots=True)
class Attributes:
    """Declared attribute types and the values of each agent and tool.

    Attributes:
        agent_types: attribute name to its type, for agents.
        tool_types: the same for tools.
        agents: principal name to its attributes, as Cedar entity JSON values.
        tools: tool name to its attributes, the same way.
    """

    agent_types: Mapping[str, str] = field(default_factory=lambda: dict(STANDARD_AGENT_TYPES))
    tool_types: Mapping[str, str] = field(default_factory=dict)
    agents: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def load_attributes(path: Path) -> Attributes:
    """Read and parse the attributes file; a missing file declares nothing.

    Raises:
        PolicyInvalid: unreadable, not TOML, or invalid (naming the table and key).
    """
    return load_optional(path, parse_attributes, Attributes)


def parse_attributes(text: str) -> Attributes:
    """Parse attributes TOML (format in the module docstring).

    Raises:
        PolicyInvalid: not TOML, an unknown section, type or attribute, or a value that
            does not have its declared type.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyInvalid(f"not TOML: {exc}") from None
    if unknown := sorted(set(data) - _SECTIONS):
        expected = "[types.agent], [types.tool], [agents.*], [tools.*]"
        raise PolicyInvalid(f"unknown table [{unknown[0]}]: expected {expected}")
    types = _table(data, "types")
    if unknown := sorted(set(types) - {"agent", "tool"}):
        raise PolicyInvalid(f"unknown table [types.{unknown[0]}]: expected agent or tool")
    agent_types = {**STANDARD_AGENT_TYPES, **_types(_table(types, "agent", "types."), "agent")}
    tool_types = _types(_table(types, "tool", "types."), "tool")
    return Attributes(
        agent_types=agent_types,
        tool_types=tool_types,
        agents=_entities(_table(data, "agents"), agent_types, "agents"),
        tools=_entities(_table(data, "tools"), tool_types, "tools"),
    )


def _table(data: Mapping[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise PolicyInvalid(f"[{prefix}{key}] must be a table")
    return value


def _types(declared: Mapping[str, Any], kind: str) -> dict[str, str]:
    for name, typed in declared.items():
        if typed not in TYPES:
            raise PolicyInvalid(f"types.{kind}.{name}: {typed!r} is not one of {', '.join(TYPES)}")
        if kind == "agent" and STANDARD_AGENT_TYPES.get(name, typed) != typed:
            raise PolicyInvalid(f"types.agent.{name}: effectgate declares it {STANDARD_AGENT_TYPES[name]}")
        if name in _RESERVED[kind]:
            raise PolicyInvalid(f"types.{kind}.{name}: {name} comes from the principal directory")
        if not _IDENTIFIER.fullmatch(name) or name in _CEDAR_RESERVED:
            raise PolicyInvalid(
                f"types.{kind}.{name}: an attribute name must be an ASCII identifier, not a Cedar keyword"
            )
    return dict(declared)


def _entities(table: Mapping[str, Any], types: Mapping[str, str], where: str) -> dict[str, dict[str, Any]]:
    entities: dict[str, dict[str, Any]] = {}
    for name, values in table.items():
        if not isinstance(values, dict):
            raise PolicyInvalid(f"[{where}.{name}] must be a table")
        entities[name] = {key: _value(value, types.get(key), f"{where}.{name}.{key}") for key, value in values.items()}
    return entities


def _value(value: Any, typed: str | None, where: str) -> Any:
    if typed is None:
        raise PolicyInvalid(f"{where}: not declared under [types]")
    if typed.startswith("Set<"):
        if not isinstance(value, list):
            raise PolicyInvalid(f"{where}: must be an array ({typed})")
        items = [_scalar(item, typed[4:-1], f"{where}[{index}]") for index, item in enumerate(value)]
        if where.endswith(".allowed_hosts"):
            items = [_host_entry(item, f"{where}[{index}]") for index, item in enumerate(items)]
        return items
    return _scalar(value, typed, where)


def _host_entry(value: Any, where: str) -> Any:
    if isinstance(value, str) and canonical_host(value) is None:
        raise PolicyInvalid(f"{where}: {value!r} is not a host as destination_host gives it (lower case, no scheme)")
    return value


def _scalar(value: Any, typed: str, where: str) -> Any:
    if typed == "decimal":
        try:
            return cedar_decimal(value, where)
        except Untypable as error:
            raise PolicyInvalid(f"{where}: {error.why}") from None
    expected = {"String": str, "Long": int, "Bool": bool}[typed]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise PolicyInvalid(f"{where}: must be a {typed}, got {value!r}")
    return value
