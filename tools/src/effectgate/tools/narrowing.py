"""How a class's operation defaults and a method's own options make the operation's options.

Rules (``docs/reference/tools-api.md``, "Class and method"):

* ``side_effect``, ``retry``, ``idempotent_at_target``, ``open_world``, ``serialize_by``: the
  method's value when it sets one, else the class's.
* ``risk``: likewise, but a method may only raise the class's tier, never lower it.
* ``concurrency_safe``: likewise, but a class declared ``False`` binds every method (a method
  may narrow ``True`` to ``False``, not the reverse).
* ``secrets``: the class's names and the method's.
* ``name``, ``description``, ``reconcile``, ``output``, ``destination``, ``amount``, ``cost``,
  ``rate_limit``: the method's own (a class's ``rate_limit`` is the tool's shared budget).
"""

from __future__ import annotations

from typing import Any, TypeVar

from effectgate.tools.declaring import OperationOptions
from effectgate.tools.errors import DeclarationError

__all__ = ["INHERITED", "narrowed"]

T = TypeVar("T")
INHERITED = ("side_effect", "risk", "concurrency_safe", "retry", "idempotent_at_target", "open_world", "serialize_by")
"""The options a method takes from its class when it sets none itself."""
_OWN = ("name", "description", "reconcile", "output", "destination", "amount", "cost", "rate_limit")


def _pick(method: T | None, klass: T | None) -> T | None:
    return method if method is not None else klass


def narrowed(klass: OperationOptions, method: OperationOptions, where: str) -> OperationOptions:
    """The options of a method's operation (module rules).

    Raises:
        DeclarationError: the method lowers the class's ``risk`` or widens ``concurrency_safe``.
    """
    _check_floors(klass, method, where)
    values: dict[str, Any] = {name: _pick(getattr(method, name), getattr(klass, name)) for name in INHERITED}
    values |= {name: getattr(method, name) for name in _OWN}
    return OperationOptions(**values, secrets=tuple(dict.fromkeys(klass.secrets + method.secrets)))


def _check_floors(klass: OperationOptions, method: OperationOptions, where: str) -> None:
    if klass.risk is not None and method.risk is not None and method.risk.rank < klass.risk.rank:
        raise DeclarationError(
            f"{where}: risk {method.risk.value!r} is below its class's {klass.risk.value!r}; "
            "a method may raise its class's risk, never lower it"
        )
    if klass.concurrency_safe is False and method.concurrency_safe is True:
        raise DeclarationError(
            f"{where}: concurrency_safe=True widens its class's concurrency_safe=False; a method may only narrow it"
        )
