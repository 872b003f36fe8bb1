"""The README's context reference is the schema policies are validated against."""

from __future__ import annotations

import re
from pathlib import Path

from toolgate.contracts.descriptors import OperationSpec, ToolDescriptor
from toolgate.contracts.directory import PrincipalDirectory
from toolgate.contracts.vocabulary import RiskTier, SideEffectClass
from toolgate.policy.args_schema import Vocabulary
from toolgate.policy.attributes import STANDARD_AGENT_TYPES, parse_attributes
from toolgate.policy.cedar_schema import schema_text
from toolgate.policy.engine import build_engine

BLOCK = re.compile(
    r"<!-- context-reference:start -->\n```cedarschema\n(.*?)\n```\n<!-- context-reference:end -->", re.S
)


def _section(repo_root: Path) -> str:
    readme = (repo_root / "README.md").read_text(encoding="utf-8")
    return readme.split("## Writing policies", 1)[1].split("\n## ", 1)[0]


def test_the_readme_shows_the_generated_schema(repo_root: Path) -> None:
    shown = BLOCK.search(_section(repo_root))
    assert shown is not None, "README.md lost its context reference block"
    assert shown[1] == schema_text(Vocabulary((), ()).record(), STANDARD_AGENT_TYPES, {}).strip("\n")


def test_the_readme_examples_load_against_that_schema(repo_root: Path) -> None:
    examples = re.findall(r"```cedar\n(.*?)```", _section(repo_root), re.S)
    assert len(examples) == 3
    schema = {"type": "object", "properties": {"recipient": {"type": "string"}}}
    pay = OperationSpec(
        input_schema=schema, output_schema={}, side_effect_class=SideEffectClass.FINANCIAL, risk_tier=RiskTier.LOW
    )
    bank = ToolDescriptor(name="bank", version="1.0.0", adapter="none", operations={"pay": pay})
    directory = PrincipalDirectory.from_toml(
        '[principals.a]\nautonomy = 1\n[approvers.f1]\nroles = ["finance"]\n[approvers.f2]\nroles = ["finance"]\n'
    )
    attributes = parse_attributes('[types.agent]\nallowed_recipients = "Set<String>"\n')
    for example in examples:
        assert build_engine(example, directory, attributes, [bank]).policy_ids
