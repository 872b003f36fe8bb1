"""A module of tools as a worker serves it: its toolbox and what its host configures, read from the module.

A module declares its tools (a curated ``TOOLS`` list, else everything :func:`~effectgate.tools.scan`
finds) and may set, at module level:

- ``VALIDATORS``: start-up rules (:mod:`effectgate.tools.rules`), checked when served and at publish;
- ``DEPENDENCIES``: a :class:`~effectgate.tools.Dependencies` for ``Provided[T]`` and ``__init__`` parameters;
- ``SECRETS``: a :class:`~effectgate.tools.SecretsProvider` (default: :class:`~effectgate.tools.EnvironmentSecrets`);
- ``SURFACE_WRAPPERS`` / ``CALLER_WRAPPERS``: wrappers (:mod:`effectgate.tools.wrappers`), the last outermost.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from effectgate.contracts.errors import Problem, described
from effectgate.tools.dependencies import Dependencies
from effectgate.tools.dispatcher import Dispatcher
from effectgate.tools.errors import DeclarationError
from effectgate.tools.secrets import EnvironmentSecrets
from effectgate.tools.toolbox import Toolbox

__all__ = ["ModuleUnimportable", "dispatcher_for_module", "imported", "toolbox_for_module"]


class ModuleUnimportable(Problem):
    """A module of tools that cannot be imported: not found, or its import raised or exited (one line)."""


def imported(module: str) -> ModuleType:
    """The module named ``module``, imported.

    Raises:
        ModuleUnimportable: ``<module> cannot be imported (<why>)``, whatever its import raised,
            ``sys.exit()`` included (an entry point must refuse it, never exit as if it had run).
    """
    try:
        return importlib.import_module(module)
    except SystemExit as exiting:
        why = f"it called sys.exit({exiting.code!r})"
    except Exception as error:
        why = f"{type(error).__name__}: {' '.join(described(error).split())}"
    raise ModuleUnimportable(f"{module} cannot be imported ({why})")


def toolbox_for_module(module: str | ModuleType, worker: str) -> Toolbox:
    """The toolbox of ``module`` (its ``TOOLS`` or what scanning finds), checked by its ``VALIDATORS``.

    Raises:
        ModuleNotFoundError: no such module.
        DeclarationError: the module declares no tool, or as :class:`~effectgate.tools.Toolbox`.
        RuleRefused: a validator refused an operation.
    """
    loaded = importlib.import_module(module) if isinstance(module, str) else module
    toolbox = Toolbox.from_module(loaded, worker=worker, validators=tuple(_setting(loaded, "VALIDATORS", ())))
    if not toolbox.tools:
        raise DeclarationError(f"{loaded.__name__} declares no tool (no TOOLS list and no @tool found)")
    return toolbox


def dispatcher_for_module(module: str | ModuleType, worker: str) -> Dispatcher:
    """The dispatcher a worker named ``worker`` serves ``module``'s tools with (module doc for the settings).

    Raises:
        ModuleNotFoundError / DeclarationError / RuleRefused: as :func:`toolbox_for_module`.
    """
    loaded = importlib.import_module(module) if isinstance(module, str) else module
    return Dispatcher(
        toolbox_for_module(loaded, worker),
        secrets=_setting(loaded, "SECRETS", None) or EnvironmentSecrets(),
        dependencies=_setting(loaded, "DEPENDENCIES", None) or Dependencies(),
        surface=tuple(_setting(loaded, "SURFACE_WRAPPERS", ())),
        caller=tuple(_setting(loaded, "CALLER_WRAPPERS", ())),
    )


def _setting(module: ModuleType, name: str, default: Any) -> Any:
    return getattr(module, name, default)
