"""The attributes file: declared types, values checked against them, pointed refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.attributes import STANDARD_AGENT_TYPES, load_attributes, parse_attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid


def test_values_become_cedar_values_and_standard_attributes_are_always_declared() -> None:
    parsed = parse_attributes(
        '[types.agent]\nlimit = "Long"\n[types.tool]\ntags = "Set<String>"\n'
        '[agents.a]\nlimit = 3\nmax_amount = 10.5\n[tools.t]\ntags = ["x"]\n'
    )
    assert dict(parsed.agent_types) == {**STANDARD_AGENT_TYPES, "limit": "Long"}
    assert parsed.agents["a"] == {"limit": 3, "max_amount": {"__extn": {"fn": "decimal", "arg": "10.5000"}}}
    assert parsed.tools["t"] == {"tags": ["x"]}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[typez]\n", "unknown table [typez]"),
        ("[types.robot]\n", "unknown table [types.robot]"),
        ('[types.agent]\nx = "Float"\n', "types.agent.x: 'Float' is not one of"),
        ('[types.agent]\nautonomy = "Long"\n', "comes from the principal directory"),
        ('[types.agent]\nmax_amount = "Long"\n', "effectgate declares it decimal"),
        ("[agents.a]\nundeclared = 1\n", "agents.a.undeclared: not declared under [types]"),
        ('[types.agent]\nn = "Long"\n[agents.a]\nn = "3"\n', "agents.a.n: must be a Long"),
        ('[types.agent]\nn = "Long"\n[agents.a]\nn = true\n', "agents.a.n: must be a Long"),
        ("[agents.a]\nmax_amount = 0.00001\n", "agents.a.max_amount: has more than 4 decimal places"),
        ('[agents.a]\nallowed_hosts = "one"\n', "agents.a.allowed_hosts: must be an array"),
        ("[agents.a]\nallowed_hosts = [1]\n", r"agents.a.allowed_hosts\[0\]: must be a String"),
        ("not toml = = \n", "not TOML"),
    ],
)
def test_a_bad_file_is_refused_naming_the_table_and_key(text: str, fragment: str) -> None:
    with pytest.raises(PolicyInvalid) as raised:
        parse_attributes(text)
    assert fragment.replace("\\", "") in raised.value.reason


def test_a_missing_file_declares_nothing_but_an_unreadable_one_is_refused(tmp_path: Path) -> None:
    assert load_attributes(tmp_path / "absent.toml").agents == {}
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(PolicyInvalid, match="bad.toml"):
        load_attributes(tmp_path / "bad.toml")


def test_attributes_of_an_agent_the_directory_does_not_know_are_unused_and_said() -> None:
    directory = PrincipalDirectory.from_toml("[principals.a]\nautonomy = 1\n")
    built = build_engine("", directory, parse_attributes("[agents.ghost]\nmax_amount = 1\n"), [])
    assert any("agents.ghost is not in the principal directory" in note for note in built.notes)
