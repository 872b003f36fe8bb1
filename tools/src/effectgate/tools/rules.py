"""Start-up rules a host checks every declared operation against, and two example rules.

A rule is a callable ``rule(tool, operation)`` that raises :class:`RuleViolation` to refuse;
:func:`check_rules` turns that into :class:`RuleRefused` naming the tool, the operation, the
rule and the field. Rules run when a :class:`~effectgate.tools.Toolbox` is built and again by
:func:`effectgate.tools.publishable` before descriptors are published.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from effectgate.tools.errors import RuleRefused, RuleViolation
from effectgate.tools.reading import DeclaredOperation, DeclaredTool

__all__ = ["Rule", "check_rules", "naming_convention", "writes_declare_reconcile"]

Rule = Callable[[DeclaredTool, DeclaredOperation], None]
"""Sees one declared operation of one tool; raises :class:`RuleViolation` to refuse it."""


def rule_name(rule: Rule) -> str:
    """A rule's name in a refusal: its ``__name__`` (or its type's)."""
    return getattr(rule, "__name__", type(rule).__name__)


def check_rules(tools: Iterable[DeclaredTool], rules: Iterable[Rule]) -> None:
    """Run every rule on every operation of every tool.

    Raises:
        RuleRefused: the first refusal, naming the tool, operation, rule and field.
    """
    listed = list(rules)
    for tool in tools:
        for operation in tool.operations.values():
            for rule in listed:
                try:
                    rule(tool, operation)
                except RuleViolation as violation:
                    raise RuleRefused(tool.name, operation.name, rule_name(rule), violation) from None


def naming_convention(pattern: str = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*\Z") -> Rule:
    """A rule: every tool and operation name matches ``pattern`` (default: snake_case)."""
    compiled = re.compile(pattern)

    def naming_convention(tool: DeclaredTool, operation: DeclaredOperation) -> None:
        for field, name in (("name", tool.name), ("operation", operation.name)):
            if not compiled.match(name):
                raise RuleViolation(field, f"{name!r} does not match {pattern}")

    return naming_convention


def writes_declare_reconcile(tool: DeclaredTool, operation: DeclaredOperation) -> None:
    """A rule: every operation that is not ``READ_ONLY`` names a ``reconcile`` operation."""
    if operation.writes and operation.spec.reconcile is None:
        side_effect = operation.spec.side_effect_class.value
        raise RuleViolation(
            "reconcile", f"a {side_effect} operation must name the READ_ONLY operation that reconciles it"
        )
