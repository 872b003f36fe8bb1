"""The context reference of docs/how-to/write-policies.md is the schema policies are validated against."""

from __future__ import annotations

import re
from pathlib import Path

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.policy.cedar.args_schema import Vocabulary
from effectgate.policy.cedar.attributes import STANDARD_AGENT_TYPES, parse_attributes
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.cedar.schema import schema_text

BLOCK = re.compile(
    r"<!-- context-reference:start -->\n```cedarschema\n(.*?)\n```\n<!-- context-reference:end -->", re.S
)


def _section(repo_root: Path) -> str:
    return (repo_root / "docs" / "how-to" / "write-policies.md").read_text(encoding="utf-8")


def test_the_guide_shows_the_generated_schema(repo_root: Path) -> None:
    shown = BLOCK.search(_section(repo_root))
    assert shown is not None, "docs/how-to/write-policies.md lost its context reference block"
    assert shown[1] == schema_text(Vocabulary((), ()).record(), STANDARD_AGENT_TYPES, {}).strip("\n")


def test_the_guide_examples_load_against_that_schema(repo_root: Path) -> None:
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
