"""The README's settings table names every environment variable a service reads, with its default."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

SETTINGS = [
    ("toolgate.shared.settings", "ServiceSettings"),
    ("toolgate.registry.settings", "RegistrySettings"),
    ("toolgate.policy.settings", "PolicySettings"),
    ("toolgate.approvals.settings", "ApprovalsSettings"),
    ("toolgate.executor.settings", "ExecutorSettings"),
    ("toolgate.audit.settings", "AuditSettings"),
    ("toolgate.chatops.settings", "ChatopsSettings"),
]


def _variables() -> list[tuple[str, object]]:
    found = []
    for module, name in SETTINGS:
        cls: type[BaseSettings] = getattr(importlib.import_module(module), name)
        for field_name, field in cls.model_fields.items():
            alias = field.validation_alias
            env = alias.choices[0] if alias is not None else f"{cls.model_config['env_prefix']}{field_name.upper()}"  # type: ignore[union-attr]
            default = json.dumps(field.default) if isinstance(field.default, dict) else field.default
            if isinstance(field.default, list):  # a list of paths, written as the variable takes it
                default = os.pathsep.join(str(item) for item in field.default)
            found.append((str(env), default))
    return sorted(set(found), key=str)


@pytest.mark.parametrize(("variable", "default"), _variables())
def test_readme_lists_the_setting_and_its_default(repo_root: Path, variable: str, default: object) -> None:
    rows = [line for line in (repo_root / "README.md").read_text().splitlines() if line.startswith(f"| `{variable}` |")]
    assert len(rows) == 1, f"README settings table has no single row for {variable}"
    expected = "unset" if default is None else f"`{default}`"
    assert expected in rows[0], f"{variable}: README does not give the default {expected}"
