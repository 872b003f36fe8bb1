"""Values a policy names that cannot exist: a literal outside an enum, an annotation naming nobody."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, Final

from cedarpy import pst

from effectgate.contracts.directory import MAX_AUTONOMY, PrincipalDirectory
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.policy.cedar.locations import Finding
from effectgate.policy.cedar.never_match import nodes, path_of

__all__ = [
    "ANNOTATIONS",
    "CONTEXT_VALUES",
    "annotation_findings",
    "argument_values",
    "literal_findings",
    "unread_annotations",
]

Value = tuple[str, Any]
"""A Cedar literal as ``("String" | "Long" | "Bool", value)``: ``True`` is not ``1``."""

CONTEXT_VALUES: Final[Mapping[str, frozenset[Value]]] = {
    "context.side_effect": frozenset(("String", str(v)) for v in SideEffectClass),
    "context.risk": frozenset(("String", str(v)) for v in RiskTier),
    "context.side_effect_rank": frozenset(("Long", n) for n in range(len(SideEffectClass))),
    "context.risk_rank": frozenset(("Long", n) for n in range(len(RiskTier))),
    "principal.autonomy": frozenset(("Long", n) for n in range(MAX_AUTONOMY + 1)),
}
"""The attributes effectgate fills from a closed set, and every value each can have."""

ANNOTATIONS: Final = ("id", "approver_role", "approvals_required", "reason")
"""The annotations effectgate reads (:mod:`effectgate.policy.cedar.annotations`,
:mod:`effectgate.policy.cedar.outcomes`)."""

_ORDER = {"less": "<", "less_eq": "<=", "greater": ">", "greater_eq": ">="}
_FLIP = {"less": "greater", "less_eq": "greater_eq", "greater": "less", "greater_eq": "less_eq"}
_HOLDS = {
    "less": lambda a, b: a < b,
    "less_eq": lambda a, b: a <= b,
    "greater": lambda a, b: a > b,
    "greater_eq": lambda a, b: a >= b,
}


def _value(expr: object) -> Value | None:
    if isinstance(expr, pst.BoolLit):
        return "Bool", expr.value
    if isinstance(expr, pst.LongLit):
        return "Long", expr.value
    if isinstance(expr, pst.StringLit):
        return "String", expr.value
    return None


def _shown(value: Value) -> str:
    kind, raw = value
    return f'"{raw}"' if kind == "String" else str(raw).lower() if kind == "Bool" else str(raw)


def argument_values(schemas: Iterable[Mapping[str, Any]]) -> dict[str, frozenset[Value]]:
    """The ``context.args`` paths every schema closes, with their values (``….tags[]``: the items).

    A path is closed when each input schema declaring it gives ``enum`` or ``const``; one
    that leaves it open (any string) opens it for every rule.
    """
    closed: dict[str, frozenset[Value] | None] = {}
    for schema in schemas:
        for path, values in _closed_paths(schema, "context.args"):
            seen = closed.get(path, frozenset())
            closed[path] = None if values is None or seen is None else seen | values
    return {path: values for path, values in closed.items() if values is not None}


def _closed_paths(schema: Any, at: str, depth: int = 0) -> Iterator[tuple[str, frozenset[Value] | None]]:
    properties = schema.get("properties") if isinstance(schema, Mapping) and depth < 8 else None
    for name, sub in (properties or {}).items() if isinstance(properties, Mapping) else ():
        yield f"{at}.{name}", _enum(sub)
        yield from _closed_paths(sub, f"{at}.{name}", depth + 1)
        if isinstance(sub, Mapping) and isinstance(items := sub.get("items"), Mapping):
            yield f"{at}.{name}[]", _enum(items)


def _enum(schema: Any) -> frozenset[Value] | None:
    raw = [schema["const"]] if isinstance(schema, Mapping) and "const" in schema else None
    raw = raw if raw is not None else (schema.get("enum") if isinstance(schema, Mapping) else None)
    if not isinstance(raw, list) or not raw:
        return None
    return frozenset(_json_value(item) for item in raw)


def _json_value(item: Any) -> Value:
    if isinstance(item, bool):
        return "Bool", item
    if isinstance(item, int):
        return "Long", item
    return ("String", item) if isinstance(item, str) else ("Other", repr(item))


def literal_findings(
    policies: Mapping[str, pst.Template], ids: Mapping[str, str], closed: Mapping[str, frozenset[Value]]
) -> list[Finding]:
    """Each comparison of a closed attribute with a value it never has, in ``policies`` (by Cedar id).

    Args:
        policies: the policy structure tree's static policies.
        ids: Cedar id to ``@id``.
        closed: attribute path to its values (:data:`CONTEXT_VALUES` and :func:`argument_values`).
    """
    found: list[Finding] = []
    for cedar_id, policy in policies.items():
        for node in nodes(policy.clauses):
            where = f"policy {ids.get(cedar_id, cedar_id)!r}"
            found += [Finding(cedar_id, f"{where}: {message}", needle) for message, needle in _judge(node, closed)]
    return found


def _dotted(expr: object) -> str:
    """``context.args.x`` for that attribute path; ``""`` for any other expression."""
    parts = path_of(expr)
    return ".".join(parts) if parts else ""


def _judge(node: object, closed: Mapping[str, frozenset[Value]]) -> Iterator[tuple[str, str]]:
    if isinstance(node, pst.Like) and (field := _dotted(node.base)) in closed:
        yield from _like(field, node.pattern, closed[field])
    if not isinstance(node, pst.BinaryOp):
        return
    for op, attr, other in ((node.op, node.left, node.right), (_FLIP.get(node.op, node.op), node.right, node.left)):
        field = _dotted(attr)
        if field in closed and (value := _value(other)) is not None:
            yield from _compared(field, op, value, closed[field])
    if node.op in ("contains", "contains_any", "contains_all"):
        yield from _contained(node, closed)


def _compared(field: str, op: str, value: Value, values: frozenset[Value]) -> Iterator[tuple[str, str]]:
    if op in ("eq", "not_eq") and value not in values:
        yield _outside(field, "==" if op == "eq" else "!=", value, values)
    elif op in _ORDER and value[0] == "Long" and not any(_HOLDS[op](v, value[1]) for _, v in values):
        shown = ", ".join(str(v) for _, v in sorted(values))
        yield (
            f"compares {field} ({_ORDER[op]}) with {value[1]}, which no value of it satisfies (one of {shown})",
            str(value[1]),
        )


def _contained(node: pst.BinaryOp, closed: Mapping[str, frozenset[Value]]) -> Iterator[tuple[str, str]]:
    """``["A", "B"].contains(field)`` and ``field.contains("A")`` / ``.containsAny([…])`` of a field of enum items."""
    literals = node.left.elements if isinstance(node.left, pst.Set) else ()
    field = _dotted(node.right)
    if node.op == "contains" and field in closed:
        for element in literals:
            if (value := _value(element)) is not None and value not in closed[field]:
                yield _outside(field, "[…].contains", value, closed[field])
    items = f"{_dotted(node.left)}[]"
    others = node.right.elements if isinstance(node.right, pst.Set) else (node.right,)
    for element in others if items in closed else ():
        if (value := _value(element)) is not None and value not in closed[items]:
            yield _outside(items, node.op, value, closed[items])


def _like(field: str, pattern: tuple[pst.PatternElem, ...], values: frozenset[Value]) -> Iterator[tuple[str, str]]:
    text = "".join(e.value if isinstance(e, pst.Char) else "*" for e in pattern)
    matcher = re.compile("".join(re.escape(e.value) if isinstance(e, pst.Char) else ".*" for e in pattern), re.DOTALL)
    if not any(kind == "String" and matcher.fullmatch(raw) for kind, raw in values):
        yield _outside(field, "like", ("String", text), values)


def _outside(field: str, op: str, value: Value, values: frozenset[Value]) -> tuple[str, str]:
    names = sorted(_shown(v) for v in values)
    close = difflib.get_close_matches(_shown(value), names, n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    listed = ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
    message = f"compares {field} ({op}) with {_shown(value)}, a value it never has (one of {listed}){hint}"
    return message, _shown(value)


def unread_annotations(policies: Mapping[str, pst.Template]) -> list[Finding]:
    """Each annotation effectgate does not read (:data:`ANNOTATIONS`), with the closest one it reads."""
    found: list[Finding] = []
    for cedar_id, policy in policies.items():
        where = f"policy {policy.annotations.get('id', cedar_id)!r}"
        unread = [name for name in policy.annotations if name not in ANNOTATIONS]
        found += [Finding(cedar_id, f"{where}: {_unknown_annotation(name)}", f"@{name}") for name in unread]
    return found


def annotation_findings(policies: Mapping[str, pst.Template], directory: PrincipalDirectory) -> list[Finding]:
    """Each ``@approver_role`` no approver of ``directory`` holds, and each quorum above the approvers holding it."""
    held: dict[str, int] = {}
    for roles in directory.approvers.values():
        for role in roles:
            held[role] = held.get(role, 0) + 1
    found: list[Finding] = []
    for cedar_id, policy in policies.items():
        where = f"policy {policy.annotations.get('id', cedar_id)!r}"
        found += [Finding(cedar_id, f"{where}: {m}", n) for m, n in _approvers(policy.annotations, held)]
    return found


def _approvers(annotations: Mapping[str, str], held: Mapping[str, int]) -> Iterator[tuple[str, str]]:
    role = annotations.get("approver_role")
    if role is None:
        return
    if role not in held:
        yield _unheld(role, held), f'"{role}"'
    quorum = annotations.get("approvals_required", "")
    if role in held and quorum.isdigit() and int(quorum) > held[role]:
        said = f"asks for {quorum} approvers holding role {role!r}, but {held[role]} hold it"
        yield f'@approvals_required("{quorum}") {said}: no call it allows could ever be approved', f'"{quorum}"'


def _unknown_annotation(name: str) -> str:
    close = difflib.get_close_matches(name, ANNOTATIONS, n=1)
    hint = f"; did you mean @{close[0]}?" if close else ""
    known = ", ".join(f"@{a}" for a in ANNOTATIONS)
    return f"@{name} is no annotation effectgate reads (it reads {known}){hint}"


def _unheld(role: str, held: Collection[str]) -> str:
    close = difflib.get_close_matches(role, sorted(held), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    roles = ", ".join(sorted(held)) or "none"
    return (
        f"@approver_role({role!r}) names a role no approver in the principal directory holds (roles held: {roles}): "
        f"every call it allows would wait on an approval nobody may give{hint}"
    )
