"""Policies that can never match, found when the policy is loaded."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

import cedarpy
from cedarpy import pst

from effectgate.policy.cedar.locations import Finding

__all__ = ["never_matching", "never_matching_findings", "nodes", "path_of", "pst_of"]

_OPTIONAL = "unable to guarantee safety of access to optional attribute"
"""Cedar 4's validator message for an unguarded read of a declared optional attribute."""


def never_matching(policy_text: str, schema: cedarpy.Schema) -> list[str]:
    """Name every policy of ``policy_text`` that can never match, and why.

    Args:
        policy_text: Cedar policies that already passed schema validation.
        schema: the Cedar schema they were validated against.

    Returns:
        One line per problem, naming the policy's ``@id`` and the field or condition;
        empty when every policy can match.
    """
    return [finding.message for finding in never_matching_findings(pst_of(policy_text), schema)]


def never_matching_findings(tree: pst.PolicySet, schema: cedarpy.Schema) -> list[Finding]:
    """:func:`never_matching` over a policy structure tree, each problem with its policy and the text to place it at."""
    problems: list[Finding] = []
    for cedar_id, policy in tree.static_policies.items():
        name = policy.annotations.get("id", cedar_id)
        for field in sorted({f for f in _has_fields(policy) if not _declared(f, schema)}):
            why = " (no registered tool has that argument)" if field.startswith("context.args.") else ""
            tested = f"policy {name!r} tests `has` on {field}"
            message = f"{tested}, which effectgate never provides{why}: it never holds"
            problems.append(Finding(cedar_id, message, field.rsplit(".", 1)[-1]))
        for clause in policy.clauses:
            if _constant(clause.expr) is isinstance(clause, pst.Unless):
                kind = "unless" if isinstance(clause, pst.Unless) else "when"
                always = "true" if kind == "unless" else "false"
                message = f"policy {name!r} has a `{kind}` condition that is always {always}: it never matches"
                problems.append(Finding(cedar_id, message, kind))
    return problems


def pst_of(policy_text: str) -> pst.PolicySet:
    """The policy structure tree of ``policy_text`` (``ValueError``: syntax cedarpy cannot model)."""
    return cedarpy.policies_to_pst(policy_text)


def nodes(node: object) -> Iterator[object]:
    """``node`` and every node under it, depth first."""
    yield node
    children: Any = ()
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        children = (getattr(node, f.name) for f in dataclasses.fields(node))
    elif isinstance(node, Mapping):
        children = node.values()
    elif isinstance(node, tuple):
        children = node
    for child in children:
        yield from nodes(child)


def path_of(expr: object) -> list[str] | None:
    """``["principal", "a", "b"]`` for ``principal.a.b``; ``None`` for anything else."""
    if isinstance(expr, pst.Var):
        return [expr.name]
    if isinstance(expr, pst.GetAttr) and (base := path_of(expr.base)) is not None:
        return [*base, expr.attr]
    return None


def _has_fields(policy: pst.Template) -> Iterator[str]:
    """Each attribute path a ``has`` tests, spelled ``principal.department``."""
    for node in nodes(policy.clauses):
        if isinstance(node, pst.HasAttr) and (base := path_of(node.base)) is not None:
            yield ".".join([*base, *node.attrs])


def _declared(field: str, schema: cedarpy.Schema) -> bool:
    """Whether Cedar accepts a read of ``field`` under ``schema`` (a probe policy is validated)."""
    var, *attrs = field.split(".")
    access = var + "".join(f"[{json.dumps(attr, ensure_ascii=False)}]" for attr in attrs)
    probe = f"permit (principal, action, resource) when {{ {access} == {access} }};"
    try:
        result = cedarpy.validate_policies(probe, schema)
    except ValueError:
        return False
    # an optional attribute is declared too: reading it unguarded is Cedar's only complaint
    return result.validation_passed or all(_OPTIONAL in str(error.error) for error in result.errors)


def _constant(expr: object) -> bool | None:
    """``True``/``False`` when ``expr`` is that constant whatever the request; else ``None``."""
    if isinstance(expr, pst.BoolLit):
        return expr.value
    if isinstance(expr, pst.UnaryOp) and expr.op == "not":
        inner = _constant(expr.arg)
        return None if inner is None else not inner
    if isinstance(expr, pst.BinaryOp) and expr.op in ("and", "or"):
        left, right = _constant(expr.left), _constant(expr.right)
        absorbing = expr.op == "or"  # true absorbs `or`, false absorbs `and`
        if absorbing in (left, right):
            return absorbing
        return left if left is not None and left == right else None
    if isinstance(expr, pst.IfThenElse):
        then, other = _constant(expr.then_expr), _constant(expr.else_expr)
        return then if then is not None and then == other else None
    return None
