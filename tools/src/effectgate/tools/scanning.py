"""Finding declared tools in a package's modules (a curated ``TOOLS`` list is the recommended form)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from effectgate.tools.declaring import is_ignored
from effectgate.tools.reading import is_tool

__all__ = ["modules_of", "scan"]


def modules_of(package: str | ModuleType) -> Iterator[ModuleType]:
    """``package`` and, when it is a package, every module under it, each imported (importing runs its code)."""
    root = importlib.import_module(package) if isinstance(package, str) else package
    yield root
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), f"{root.__name__}."):
        yield importlib.import_module(info.name)


def scan(package: str | ModuleType, predicate: Callable[[Any], bool] | None = None) -> list[Any]:
    """Every ``@tool`` class or function defined in ``package``'s modules, in module then definition order.

    Skips what is marked ``@ignore``, what a module only imports, and what ``predicate`` refuses.
    """
    found: list[Any] = []
    for module in modules_of(package):
        for member in list(vars(module).values()):
            if _counts(member, module) and member not in found and (predicate is None or predicate(member)):
                found.append(member)
    return found


def _counts(member: Any, module: ModuleType) -> bool:
    return is_tool(member) and getattr(member, "__module__", None) == module.__name__ and not is_ignored(member)
