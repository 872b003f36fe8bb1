"""Every file, module attribute, test and setting the docs (docs/**/*.md) cite exists.

The docs name code by short paths (``policy/in_force/holder.py`` is the policy service's
``holder`` module, ``contracts/canonical.unrepresentable`` a function of the shared package),
by repository paths (``tests/e2e/test_audit.py``) and by environment variable. A rename that
leaves the docs behind fails here, naming the citation.
"""

from __future__ import annotations

import importlib
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
DOC = "\n\n".join(page.read_text() for page in PAGES)
CITED = sorted(set(re.findall(r"`([^`\s]+)`", DOC)))
PACKAGES = {
    "shared": ROOT / "shared/src/effectgate/shared",
    "cli": ROOT / "cli/src/effectgate/cli",
    "sdk": ROOT / "sdk/src/effectgate/sdk",
    **{path.name: path / "src/effectgate" / path.name for path in (ROOT / "services").iterdir()},
}
MODULE_FILE = re.compile(r"^(\w+)/([\w/]+\.py)$")
MODULE_ATTRIBUTE = re.compile(r"^(\w+)/([\w/]+)\.(?!py$)(\w+)$")
SETTING = re.compile(r"EFFECTGATE_[A-Z0-9_]*[A-Z0-9]")


@cache
def python_sources() -> str:
    """Every Python source of the workspace (services, contracts, shared, devstack, sdk, tools, cli, tests), ./dev."""
    parts = ("services", "contracts", "shared", "devstack", "sdk", "tools", "cli", "tests")
    sources = [path.read_text() for part in parts for path in (ROOT / part).rglob("*.py")]
    return "\n".join([*sources, (ROOT / "dev").read_text()])


def from_the_root(cited: str) -> bool:
    """Whether ``cited`` is a path from the repository root (its first two parts are a directory there)."""
    parts = cited.split("/")
    return len(parts) > 2 and (ROOT / parts[0] / parts[1]).is_dir() or parts[0] in ("tests", "deploy", "docs")


def repository_paths() -> list[str]:
    return [c for c in CITED if "/" in c and from_the_root(c) and "<" not in c and "..." not in c]


def module_files() -> list[tuple[str, str, str]]:
    found = [(c, m) for c in CITED if (m := MODULE_FILE.match(c)) and m[1] in PACKAGES and not from_the_root(c)]
    return [(c, m[1], m[2]) for c, m in found]


def module_attributes() -> list[tuple[str, str, str, str]]:
    return [(c, *m.groups()) for c in CITED if (m := MODULE_ATTRIBUTE.match(c)) and m[1] in PACKAGES]


def test_the_document_cites_each_kind() -> None:
    assert len(repository_paths()) > 5 and len(module_files()) > 20 and len(module_attributes()) > 3


@pytest.mark.parametrize("path", repository_paths())
def test_a_cited_repository_path_exists(path: str) -> None:
    assert (ROOT / path.rstrip("/")).exists(), f"the docs cite {path}, which does not exist"


@pytest.mark.parametrize(("cited", "package", "module"), module_files(), ids=lambda v: v)
def test_a_cited_module_exists(cited: str, package: str, module: str) -> None:
    assert (PACKAGES[package] / module).is_file(), f"the docs cite {cited}, which does not exist"


@pytest.mark.parametrize(("cited", "package", "module", "name"), module_attributes(), ids=lambda v: v)
def test_a_cited_module_attribute_exists(cited: str, package: str, module: str, name: str) -> None:
    dotted = f"effectgate.{package}.{module.replace('/', '.')}"
    assert hasattr(importlib.import_module(dotted), name), f"the docs cite {cited}: {dotted} has no {name}"


@pytest.mark.parametrize("variable", sorted(set(SETTING.findall(DOC))))
def test_a_cited_environment_variable_is_read_somewhere(variable: str) -> None:
    sources = python_sources()
    prefix_and_field = re.match(r"(EFFECTGATE_[A-Z]+_)(\w+)", variable)
    read = variable in sources or (
        prefix_and_field is not None
        and f'"{prefix_and_field[1]}"' in sources
        and re.search(rf"^\s+{prefix_and_field[2].lower()}\s*:", sources, re.M) is not None
    )
    assert read, f"the docs cite {variable}, which no source reads"


@pytest.mark.parametrize("test_file", sorted(set(re.findall(r"(tests/e2e/test_\w+\.py)", DOC))))
def test_each_guarantee_table_entry_names_an_e2e_module_that_exists(test_file: str) -> None:
    assert (ROOT / test_file).is_file(), test_file
