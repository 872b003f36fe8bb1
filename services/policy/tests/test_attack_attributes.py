"""A careless operator's attributes file: names Cedar cannot hold, allow-list entries that never match.

Each test names the exact file content, what happens now, and what should happen.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid

DIRECTORY = PrincipalDirectory.from_toml("[principals.a1]\nautonomy = 1\n")


@pytest.fixture(scope="module")
def shipped_text(repo_root: Path) -> str:
    return (repo_root / "deploy/policy/policy.cedar").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["in", "is", "has", "like", "if", "then", "else", "true", "false", "größe"])
def test_an_attribute_name_cedar_cannot_hold_is_refused_naming_it(shipped_text: str, name: str) -> None:
    """Input: ``[types.agent]`` with ``in = "String"`` (or ``like``, ``größe``, …).

    Now: ``parse_attributes`` accepts it (``str.isidentifier`` is true for Python keywords
    and non-ASCII letters), then ``cedarpy.Schema.from_str`` raises ``ValueError``
    ("`in` is a reserved identifier", "invalid token") from ``build_engine``: not
    ``PolicyInvalid``, so ``PolicyHolder.rebuild`` raises and the policy service crashes
    at start with a traceback instead of reporting NOT READY. Should: ``PolicyInvalid``
    naming ``types.agent.<name>`` (Cedar identifiers are ASCII ``[_a-zA-Z][_a-zA-Z0-9]*``
    and not reserved words).
    """
    with pytest.raises(PolicyInvalid, match=f"types.agent.{name}"):
        build_engine(shipped_text, DIRECTORY, parse_attributes(f'[types.agent]\n"{name}" = "String"\n'), [])


@pytest.mark.parametrize("entry", ["Docs.Python.org", "https://docs.python.org", "https://docs.python.org/"])
def test_an_allowed_host_no_destination_host_can_equal_is_refused(entry: str) -> None:
    """Input: ``[agents.a1] allowed_hosts = ["https://docs.python.org"]`` (or upper-case letters).

    Now: accepted; ``context.destination_host`` is always a lower-case bare host, so the
    entry never matches and every read of that site silently waits for an operator (fail
    closed, but a silent never-match docs/how-to/write-policies.md says policies cannot have). Should:
    ``PolicyInvalid`` naming ``agents.a1.allowed_hosts`` and the entry.
    """
    with pytest.raises(PolicyInvalid, match="agents.a1.allowed_hosts"):
        parse_attributes(f'[agents.a1]\nallowed_hosts = ["{entry}"]\n')
