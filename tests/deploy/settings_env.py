"""The environment names each service reads, from its settings class: what deploy files may set."""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import AliasChoices, AliasPath
from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[2]


def alias_names(alias: str | AliasPath | AliasChoices | None) -> list[str]:
    """The environment names a ``validation_alias`` stands for."""
    if alias is None:
        return []
    if isinstance(alias, str):
        return [alias]
    if isinstance(alias, AliasPath):
        return [str(alias.path[0])]
    return [name for choice in alias.choices for name in alias_names(choice)]


def settings_env_names(settings: type[BaseSettings]) -> set[str]:
    """Every variable a settings class reads: its aliases, else ``env_prefix + NAME``."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    names: set[str] = set()
    for name, info in settings.model_fields.items():
        names.update(alias_names(info.validation_alias) or [f"{prefix}{name}".upper()])
    return names


def settings_class(service: str) -> type[BaseSettings]:
    """``effectgate.<service>.settings.<Service>Settings``."""
    module = importlib.import_module(f"effectgate.{service}.settings")
    found: type[BaseSettings] = getattr(module, f"{service.capitalize()}Settings")
    return found


def workspace_services() -> list[str]:
    """Every service of the workspace (a folder of services/ with a pyproject.toml), sorted."""
    return sorted(path.name for path in (ROOT / "services").iterdir() if (path / "pyproject.toml").exists())
