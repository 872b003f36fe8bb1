"""What ``effectgate.sdk`` exports: exactly these names, and every error its client's methods raise."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import effectgate.contracts
import effectgate.sdk
from effectgate.sdk import ToolClient

SDK = Path(effectgate.sdk.__file__).parent

EXPORTED = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "CredentialsInvalid",
    "DuplicateRequest",
    "GatewayStoreFull",
    "ReceiptKeyMissing",
    "RecordsNoAnswer",
    "RegistryNoAnswer",
    "RegistryUnavailable",
    "ResultUnavailable",
    "SchemaUnusable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
    "ended_as",
    "resolution_note",
    "resolved_as",
]

RAISES_ENTRY = re.compile(r"^ {4}([\w. /]+?):", re.MULTILINE)
"""An entry of a (dedented) method docstring's ``Raises:`` section: ``Name:`` or ``A / B:``, dotted names allowed."""


def own_errors() -> dict[str, type[BaseException]]:
    """Every exception class defined in the sdk or the contracts, by name."""
    found: dict[str, type[BaseException]] = {}
    for package in (effectgate.sdk, effectgate.contracts):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            for name, value in vars(importlib.import_module(module.name)).items():
                if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.name:
                    found[name] = value
    return found


def raised_in_sdk_modules() -> set[str]:
    """The class names of every ``raise X(…)`` in the sdk's modules (``raise (A if … else B)(…)`` gives both)."""
    names: set[str] = set()
    for path in SDK.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                names |= {n.id for n in ast.walk(node.exc.func) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.exc.func) if isinstance(n, ast.Attribute)}
    return names


def documented_by_public_methods() -> set[str]:
    """The last dotted part of every name in the ``Raises:`` sections of the client's public methods."""
    names: set[str] = set()
    public = [member for name, member in inspect.getmembers(ToolClient) if not name.startswith("_")]
    for doc in (inspect.getdoc(member) or "" for member in public):
        for entry in RAISES_ENTRY.findall(doc.partition("Raises:")[2]):
            names |= {part.strip().rsplit(".", 1)[-1] for part in entry.split("/")}
    return names


def test_the_exported_names_are_exactly_these() -> None:
    assert sorted(effectgate.sdk.__all__) == EXPORTED


def test_every_exported_name_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec("from effectgate.sdk import *", namespace)
    assert set(effectgate.sdk.__all__) <= set(namespace)


def test_every_error_raised_in_the_sdks_modules_is_exported() -> None:
    ours = own_errors()
    raised = {name for name in raised_in_sdk_modules() if name in ours}
    assert {"GatewayStoreFull", "UnknownTool", "ReceiptKeyMissing"} <= raised, "the walk finds the raises"
    assert raised <= set(effectgate.sdk.__all__), f"raised, not exported: {raised - set(effectgate.sdk.__all__)}"


def test_every_error_the_clients_public_methods_name_is_exported() -> None:
    ours = own_errors()
    named = {name for name in documented_by_public_methods() if name in ours}
    assert {"CredentialsInvalid", "SchemaUnusable", "ApprovalsNoAnswer"} <= named, "the docstrings are read"
    assert named <= set(effectgate.sdk.__all__), f"named, not exported: {named - set(effectgate.sdk.__all__)}"
    for name in named:
        assert getattr(effectgate.sdk, name) is ours[name], f"effectgate.sdk.{name} is another class"
