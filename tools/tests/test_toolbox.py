"""A toolbox from a module's curated list or a scan; validators at build and at publish."""

from __future__ import annotations

import pytest

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import (
    DeclarationError,
    Reconciled,
    RuleRefused,
    RuleViolation,
    Toolbox,
    naming_convention,
    operation,
    publishable,
    scan,
    tool,
    writes_declare_reconcile,
)
from effectgate.tools.reading import DeclaredOperation, DeclaredTool
from tools.tests.sample_tools import accounts, mail


def test_a_module_s_curated_list_is_what_its_toolbox_serves() -> None:
    box = Toolbox.from_module("tools.tests.sample_tools.mail", worker="mailer")
    assert [d.name for d in box.descriptors()] == ["send"]


def test_a_module_without_a_list_is_scanned_for_its_own_tools_leaving_out_the_ignored_and_the_imported() -> None:
    box = Toolbox.from_module(accounts, worker="books")
    assert [d.name for d in box.descriptors()] == ["accounts", "audit_trail"]


def test_a_package_scan_walks_every_module_and_honours_ignore_and_the_predicate() -> None:
    found = scan("tools.tests.sample_tools")
    assert found == [accounts.Accounts, accounts.audit_trail, mail.send, mail.draft]
    assert accounts.Experimental not in found
    assert scan("tools.tests.sample_tools", predicate=lambda item: isinstance(item, type)) == [accounts.Accounts]


@tool(side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW)
class Notes:
    @operation(reconcile="Find")
    async def add(self, text: str) -> str:
        return text

    @operation(side_effect=SideEffectClass.READ_ONLY, name="Find")
    async def find(self, text: str) -> Reconciled:
        raise NotImplementedError


def test_a_rule_s_refusal_names_the_tool_the_rule_and_the_field() -> None:
    with pytest.raises(RuleRefused) as refused:
        Toolbox([Notes], worker="w", validators=[naming_convention()])
    error = refused.value
    assert (error.tool, error.operation, error.rule, error.field) == ("notes", "Find", "naming_convention", "operation")
    assert "notes.Find: rule 'naming_convention' refuses operation" in str(error)


def test_every_write_declares_a_reconcile_step() -> None:
    Toolbox([Notes], worker="w", validators=[writes_declare_reconcile])
    with pytest.raises(RuleRefused, match=r"send\.send: rule 'writes_declare_reconcile' refuses reconcile"):
        Toolbox([mail.send], worker="w", validators=[writes_declare_reconcile])


def test_rules_run_again_at_publish_time() -> None:
    calls: list[str] = []

    def counting(tool: DeclaredTool, operation: DeclaredOperation) -> None:
        calls.append(operation.name)
        if len(calls) > 1:
            raise RuleViolation("name", "refused the second time")

    box = Toolbox([mail.send], worker="w", validators=[counting])
    with pytest.raises(RuleRefused, match="refused the second time"):
        publishable(box)
    assert calls == ["send", "send"]


def test_publishable_gives_the_descriptors_when_every_rule_passes() -> None:
    box = Toolbox([mail.send, mail.draft], worker="w", validators=[naming_convention()])
    assert [d.name for d in publishable(box)] == ["draft", "send"]


def test_two_tools_of_one_name_or_a_bad_worker_name_are_refused() -> None:
    with pytest.raises(DeclarationError, match="two declarations use this tool name"):
        Toolbox([mail.send, mail.send], worker="w")
    with pytest.raises(DeclarationError, match="worker: 'Bad' must match"):
        Toolbox([mail.send], worker="Bad")
