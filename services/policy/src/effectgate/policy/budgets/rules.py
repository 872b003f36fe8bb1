"""Spend budgets: the budgets file, the cost of a call, and fixed windows. Pure."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec

from effectgate.contracts.errors import Problem
from effectgate.contracts.tools.descriptors import TOOL_NAME, OperationSpec
from effectgate.contracts.tools.pointers import MISSING, resolve
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.in_force.files import load_optional

__all__ = [
    "ANY_PRINCIPAL",
    "MAX_UNITS",
    "UNITS_PER_COST",
    "Budget",
    "BudgetBook",
    "CostUnknown",
    "as_cost",
    "cost_units",
    "load_budgets",
    "parse_budgets",
    "units_of",
    "window_start",
]

UNITS_PER_COST = 10_000
"""Units of one cost: costs and limits have at most 4 decimal places."""

MAX_UNITS = 10**15
"""Largest limit or cost in units (10^11 in cost): sums stay exact in Redis's Lua doubles (< 2^53)."""

ANY_PRINCIPAL = "*"
"""A budget's ``principal`` meaning every principal, each with a counter of its own."""

MAX_WINDOW_S = 366 * 86_400
"""Longest window, seconds (a leap year)."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
_FIELDS = "name, principal, tool, operation, limit, window_s"


class CostUnknown(Problem):
    """The cost of a call cannot be known exactly (``budget_cost_unknown``).

    Attributes:
        why: what is wrong, naming the pointer or the fixed cost.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class _Entry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    principal: str
    limit: int | float | str
    window_s: int
    tool: str | None = None
    operation: str | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    """One budget of the file.

    Attributes:
        name: unique name, one subject token.
        principal: the principal it limits, or :data:`ANY_PRINCIPAL`.
        tool / operation: the calls it counts (``None``: any).
        limit_units: most one window may spend, in units.
        window_s: window length, seconds.
    """

    name: str
    principal: str
    limit_units: int
    window_s: int
    tool: str | None = None
    operation: str | None = None

    def applies(self, principal: str, tool: str, operation: str) -> bool:
        """Whether a call of ``tool.operation`` by ``principal`` counts against this budget."""
        return (
            self.principal in (ANY_PRINCIPAL, principal)
            and self.tool in (None, tool)
            and self.operation in (None, operation)
        )


@dataclass(frozen=True, slots=True)
class BudgetBook:
    """Every budget of the file, in file order (empty: no budgets)."""

    budgets: tuple[Budget, ...] = ()

    def applying(self, principal: str, tool: str, operation: str) -> tuple[Budget, ...]:
        """The budgets a call of ``tool.operation`` by ``principal`` counts against."""
        return tuple(b for b in self.budgets if b.applies(principal, tool, operation))

    def check_principals(self, principals: Collection[str], where: str) -> None:
        """Refuse a budget naming a principal not in ``principals``: a typo would silently cap nobody.

        Raises:
            PolicyInvalid: ``<where>: budgets[<index>] (<name>): principal: … is not in the principal directory``.
        """
        for index, budget in enumerate(self.budgets):
            if budget.principal != ANY_PRINCIPAL and budget.principal not in principals:
                reason = f"principal: {budget.principal!r} is not in the principal directory"
                raise PolicyInvalid(f"{where}: budgets[{index}] ({budget.name}): {reason}")

    def named(self, name: str) -> Budget | None:
        """The budget called ``name``, or ``None``."""
        return next((b for b in self.budgets if b.name == name), None)


def window_start(at_s: float, window_s: int) -> int:
    """Start (Unix seconds) of the epoch-aligned window of ``window_s`` seconds holding ``at_s``."""
    whole = int(at_s // 1)
    return whole - whole % window_s


def units_of(number: Any, what: str) -> int:
    """``number`` as exact units of 1/10000, at least 0.

    Raises:
        CostUnknown: not a number (a boolean is not), negative, more than 4 decimal
            places, or above :data:`MAX_UNITS`; ``what`` names it in the message.
    """
    if isinstance(number, bool) or not isinstance(number, int | float | str):
        raise CostUnknown(f"{what} is not a number: {number!r}")
    try:
        exact = Decimal(str(number)) * UNITS_PER_COST
    except InvalidOperation:
        raise CostUnknown(f"{what} is not a number: {number!r}") from None
    if not exact.is_finite() or exact < 0:
        raise CostUnknown(f"{what} must be a finite number of at least 0, got {number!r}")
    if exact != exact.to_integral_value():
        raise CostUnknown(f"{what} has more than 4 decimal places: {number!r}")
    if exact > MAX_UNITS:
        raise CostUnknown(f"{what} is above the largest cost, {MAX_UNITS // UNITS_PER_COST}: {number!r}")
    return int(exact)


def as_cost(units: int) -> str:
    """Units as a plain decimal text: ``1000000`` → ``"100"``, ``15`` → ``"0.0015"``."""
    text = format(Decimal(units) / UNITS_PER_COST, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def cost_units(spec: OperationSpec, arguments: Mapping[str, Any]) -> int | None:
    """The cost of one call of ``spec`` with ``arguments``, in units; ``None`` when it declares none.

    Raises:
        CostUnknown: the pointer resolves to nothing, or to something that is not an
            exact number of at least 0 (fail closed: the call is denied).
    """
    cost = spec.cost
    if cost is None:
        return None
    if not isinstance(cost, str):
        return units_of(cost, "the operation's fixed cost")
    try:
        value = resolve(cost, arguments)
    except Exception as error:  # the registry refuses bad pointers; an old descriptor may hold one
        raise CostUnknown(f"the cost pointer {cost!r} is not a JSON Pointer: {error}") from None
    if value is MISSING:
        raise CostUnknown(f"the arguments hold no cost at {cost}")
    return units_of(value, f"the cost at {cost}")


def load_budgets(path: Path) -> BudgetBook:
    """Read and parse the budgets file; a missing file is no budgets.

    Raises:
        PolicyInvalid: unreadable, not TOML, or an invalid entry (named, with its field).
    """
    return load_optional(path, parse_budgets, BudgetBook)


def parse_budgets(text: str) -> BudgetBook:
    """Parse budgets TOML (format in the module docstring).

    Raises:
        PolicyInvalid: not TOML, a key other than ``budgets``, or an invalid entry:
            ``budgets[<index>] (<name>): <field>: <problem>``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyInvalid(f"not TOML: {exc}") from None
    if unknown := sorted(set(data) - {"budgets"}):
        raise PolicyInvalid(f"unknown key {unknown[0]!r}: the file holds only [[budgets]] tables")
    entries = data.get("budgets", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise PolicyInvalid("budgets must be an array of tables ([[budgets]])")
    budgets = tuple(_budget(index, entry) for index, entry in enumerate(entries))
    seen: set[str] = set()
    for index, budget in enumerate(budgets):
        if budget.name in seen:
            raise PolicyInvalid(f"budgets[{index}] ({budget.name}): name: another budget has this name")
        seen.add(budget.name)
    return BudgetBook(budgets)


def _budget(index: int, entry: dict[str, Any]) -> Budget:
    where = f"budgets[{index}]" + (f" ({entry['name']})" if isinstance(entry.get("name"), str) else "")
    try:
        parsed = msgspec.convert(entry, _Entry)
    except msgspec.ValidationError as error:
        raise PolicyInvalid(f"{where}: {_pointed(str(error))}") from None
    if problem := _problem(parsed):
        raise PolicyInvalid(f"{where}: {problem}")
    try:
        limit = units_of(parsed.limit, "limit")
    except CostUnknown as error:
        raise PolicyInvalid(f"{where}: limit: {error.why}") from None
    return Budget(parsed.name, parsed.principal, limit, parsed.window_s, parsed.tool, parsed.operation)


def _problem(entry: _Entry) -> str | None:
    if not _NAME.match(entry.name):
        return f"name: must match {_NAME.pattern}, got {entry.name!r}"
    if entry.principal != ANY_PRINCIPAL and not _NAME.match(entry.principal):
        return f'principal: a principal name or "*", got {entry.principal!r}'
    if entry.tool is not None and not TOOL_NAME.match(entry.tool):
        return f"tool: must match {TOOL_NAME.pattern}, got {entry.tool!r}"
    if entry.operation is not None and entry.tool is None:
        return "operation: needs tool (an operation is named within its tool)"
    if entry.operation is not None and not (0 < len(entry.operation) <= 128 and entry.operation.isprintable()):
        return f"operation: 1 to 128 printable characters, got {entry.operation!r}"
    if not 1 <= entry.window_s <= MAX_WINDOW_S:
        return f"window_s: whole seconds from 1 to {MAX_WINDOW_S}, got {entry.window_s!r}"
    return None


def _pointed(message: str) -> str:
    """A msgspec message as ``<field>: <problem>`` (from ``Expected `int`, got `str` - at `$.window_s```)."""
    if found := re.fullmatch(r"(.*) - at `\$\.(\w+)`", message):
        return f"{found[2]}: {found[1][0].lower()}{found[1][1:]}"
    if found := re.fullmatch(r"Object contains unknown field `(.*)`", message):
        return f"{found[1]}: unknown key (a budget has {_FIELDS})"
    if found := re.fullmatch(r"Object missing required field `(.*)`", message):
        return f"{found[1]}: missing"
    return message
