"""A host's declared tools, read once at start-up: their descriptors and what serving them needs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from types import ModuleType
from typing import Any

from effectgate.contracts.tools.adapters import SERVER_NAME
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.tools.errors import DeclarationError
from effectgate.tools.publishing import check_descriptor
from effectgate.tools.reading import DeclaredTool, declared
from effectgate.tools.rules import Rule, check_rules
from effectgate.tools.scanning import scan

__all__ = ["Toolbox", "publishable"]


class Toolbox:
    """The tools one worker serves, read from their declarations (nothing is instantiated).

    Args:
        tools: ``@tool`` classes and functions.
        worker: the worker's name (``contracts.tools.adapters.SERVER_NAME``); descriptors say ``python:<worker>``.
        validators: start-up rules (:mod:`effectgate.tools.rules`) every operation must pass.

    Raises:
        DeclarationError: a tool's declaration or generated descriptor is refused, two tools share a name.
        RuleRefused: a validator refused an operation.
    """

    def __init__(self, tools: Iterable[Any], *, worker: str, validators: Sequence[Rule] = ()) -> None:
        if not SERVER_NAME.match(worker):
            raise DeclarationError(f"worker: {worker!r} must match {SERVER_NAME.pattern}")
        self.worker = worker
        self.validators = tuple(validators)
        self._tools: dict[str, DeclaredTool] = {}
        for target in tools:
            self._add(declared(target))
        self.check()

    def _add(self, tool: DeclaredTool) -> None:
        if tool.name in self._tools:
            raise DeclarationError(f"{tool.name}: two declarations use this tool name")
        self._tools[tool.name] = tool

    @classmethod
    def from_module(
        cls,
        module: str | ModuleType,
        *,
        worker: str,
        validators: Sequence[Rule] = (),
        predicate: Callable[[Any], bool] | None = None,
    ) -> Toolbox:
        """The tools of ``module``: its curated ``TOOLS`` list when it has one, else what :func:`scan` finds.

        Raises:
            DeclarationError: as :class:`Toolbox`, or ``TOOLS`` is not a list or tuple.
        """
        loaded = importlib.import_module(module) if isinstance(module, str) else module
        curated = getattr(loaded, "TOOLS", None)
        if curated is None:
            return cls(scan(loaded, predicate), worker=worker, validators=validators)
        if not isinstance(curated, list | tuple):
            raise DeclarationError(f"{loaded.__name__}.TOOLS must be a list of @tool classes and functions")
        return cls(curated, worker=worker, validators=validators)

    @property
    def tools(self) -> dict[str, DeclaredTool]:
        """Every declared tool by name."""
        return dict(self._tools)

    def descriptors(self) -> list[ToolDescriptor]:
        """Every tool's descriptor (adapter ``python:<worker>``), by tool name."""
        return [self._tools[name].descriptor(self.worker) for name in sorted(self._tools)]

    def check(self) -> None:
        """Run the validators and the registry's descriptor rules on every tool.

        Raises:
            RuleRefused: a validator refused an operation.
            DeclarationError: a descriptor the registry would refuse.
        """
        check_rules(self._tools.values(), self.validators)
        for descriptor in self.descriptors():
            check_descriptor(descriptor)


def publishable(toolbox: Toolbox) -> list[ToolDescriptor]:
    """The descriptors to publish, after the toolbox's validators and descriptor checks ran again.

    Raises:
        RuleRefused / DeclarationError: as :meth:`Toolbox.check`; nothing is to be published then.
    """
    toolbox.check()
    return toolbox.descriptors()
