"""docs/reference/settings.md names every environment variable a service reads, with its default."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

SETTINGS = [
    ("effectgate.shared.config.settings", "ServiceSettings"),
    ("effectgate.shared.config.bus", "BusSettings"),
    ("effectgate.registry.settings", "RegistrySettings"),
    ("effectgate.policy.settings", "PolicySettings"),
    ("effectgate.approvals.settings", "ApprovalsSettings"),
    ("effectgate.executor.settings", "ExecutorSettings"),
    ("effectgate.audit.settings", "AuditSettings"),
    ("effectgate.chatops.settings", "ChatopsSettings"),
    ("effectgate.surface.settings", "SurfaceSettings"),
]


def _variables() -> list[tuple[str, object]]:
    found = []
    for module, name in SETTINGS:
        cls: type[BaseSettings] = getattr(importlib.import_module(module), name)
        for field_name, field in cls.model_fields.items():
            alias = field.validation_alias
            if alias is None and name == "ServiceSettings":
                continue  # read by each service under its own prefix: the subclasses' rows
            env = alias.choices[0] if alias is not None else f"{cls.model_config['env_prefix']}{field_name.upper()}"  # type: ignore[union-attr]
            default = json.dumps(field.default) if isinstance(field.default, dict) else field.default
            if isinstance(field.default, list):  # a list of paths, written as the variable takes it
                default = os.pathsep.join(str(item) for item in field.default)
            found.append((str(env), default))
    return sorted(set(found), key=str)


SERVICES = ("REGISTRY", "POLICY", "APPROVALS", "EXECUTOR", "AUDIT", "CHATOPS", "SURFACE")


def _generic(variable: str) -> str:
    """``EFFECTGATE_POLICY_HTTP_PORT`` → ``EFFECTGATE_<SERVICE>_HTTP_PORT``: one row for every service."""
    for service in SERVICES:
        if variable.startswith(f"EFFECTGATE_{service}_"):
            return variable.replace(f"_{service}_", "_<SERVICE>_", 1)
    return variable


def _row_name(line: str) -> str:
    return line.split("`")[1] if line.startswith("| `") else ""


@pytest.mark.parametrize(("variable", "default"), _variables())
def test_the_reference_lists_the_setting_and_its_default(repo_root: Path, variable: str, default: object) -> None:
    names = {variable, _generic(variable)}
    page = (repo_root / "docs" / "reference" / "settings.md").read_text()
    rows = [line for line in page.splitlines() if _row_name(line) in names]
    assert len(rows) == 1, f"docs/reference/settings.md has no single row for {variable}"
    expected = "unset" if default is None else f"`{default}`"
    assert expected in rows[0], f"{variable}: docs/reference/settings.md does not give the default {expected}"
