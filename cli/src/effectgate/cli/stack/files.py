"""Where a stack's files are: the ones ``effectgate up`` gives the services, which the CLI reads too.

``up`` points every service at absolute paths: the policy, principal directory, attributes and
budgets of ``<deploy>/policy`` and the descriptors of ``<deploy>/tools`` (:func:`config_env`),
unless the person running it exported the setting (:func:`chosen_config`). ``<deploy>`` is
``EFFECTGATE_DEPLOY_DIR``, else the checkout's ``deploy/`` (:func:`deploy_dir`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from effectgate.shared.config.effectgate_file import EffectgateConfig
from effectgate.shared.config.toml_file import absolute

__all__ = [
    "ATTRIBUTES_ENV",
    "DEPLOY_DIR",
    "DEPLOY_DIR_ENV",
    "DESCRIPTORS_ENV",
    "PRINCIPALS_ENV",
    "AttributesOption",
    "PrincipalsOption",
    "chosen_config",
    "config_env",
    "deploy_dir",
    "descriptor_dirs",
    "service_file",
]

DEPLOY_DIR_ENV = "EFFECTGATE_DEPLOY_DIR"
PRINCIPALS_ENV = "EFFECTGATE_POLICY_PRINCIPALS_FILE"
ATTRIBUTES_ENV = "EFFECTGATE_POLICY_ATTRIBUTES_FILE"
DESCRIPTORS_ENV = "EFFECTGATE_REGISTRY_DESCRIPTORS_DIR"

_CHECKOUT_DEPLOY = Path(__file__).resolve().parents[5] / "deploy"  # the package's own place, not a configured path


def deploy_dir() -> Path:
    """The default policy, principal directory and tool descriptors: ``EFFECTGATE_DEPLOY_DIR``, else the checkout's."""
    return absolute(Path(os.environ.get(DEPLOY_DIR_ENV) or _CHECKOUT_DEPLOY))


DEPLOY_DIR = deploy_dir()
""":func:`deploy_dir` when the CLI was started."""


def config_env(deploy: Path | None = None) -> dict[str, str]:
    """Settings pointing every service at the files of ``deploy`` (default :func:`deploy_dir`), absolute paths."""
    deploy = deploy or deploy_dir()
    policy = deploy / "policy"
    return {
        "EFFECTGATE_POLICY_POLICY_FILE": str(policy / "policy.cedar"),
        PRINCIPALS_ENV: str(policy / "principals.toml"),
        ATTRIBUTES_ENV: str(policy / "attributes.toml"),
        "EFFECTGATE_POLICY_BUDGETS_FILE": str(policy / "budgets.toml"),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(policy / "principals.toml"),
        "EFFECTGATE_CHATOPS_PRINCIPALS_FILE": str(policy / "principals.toml"),
        DESCRIPTORS_ENV: str(deploy / "tools"),
    }


def chosen_config(extra: dict[str, str]) -> dict[str, str]:
    """The files every service is pointed at: ``extra``, else the environment's own setting, else ``deploy/``.

    A setting the person running ``up`` exported (``EFFECTGATE_CHATOPS_PRINCIPALS_FILE=…``)
    is kept, never replaced by the deploy directory's default (an exported file path made
    absolute, symlinks kept; an empty one counts as unset).
    """
    defaults = config_env()
    exported = {name: value for name in defaults if (value := os.environ.get(name))}
    exported = {name: _absolute_paths(name, value) for name, value in exported.items()}
    return {**defaults, **exported, **{name: extra[name] for name in defaults if name in extra}}


def _absolute_paths(name: str, value: str) -> str:
    parts = [part for part in value.split(os.pathsep) if part] if name == DESCRIPTORS_ENV else [value]
    return os.pathsep.join(str(absolute(Path(part))) for part in parts)


def service_file(name: str, given: Path | None) -> Path:
    """The file setting ``name`` names: ``given`` (an option, or its environment variable), else what ``up`` gives."""
    return absolute(given) if given is not None else Path(chosen_config({})[name])


def descriptor_dirs(config: EffectgateConfig) -> tuple[list[Path], str]:
    """The directories ``up``'s registry publishes descriptors from, and where that choice comes from.

    ``EFFECTGATE_REGISTRY_DESCRIPTORS_DIR`` when exported (``:``-separated), else the config
    file's ``tools.descriptor_dirs``, else ``<deploy>/tools``.
    """
    if os.environ.get(DESCRIPTORS_ENV):
        return [Path(part) for part in chosen_config({})[DESCRIPTORS_ENV].split(os.pathsep)], DESCRIPTORS_ENV
    if (dirs := config.descriptor_dirs()) is not None and config.path is not None:
        return dirs, f"{config.path.name}: tools.descriptor_dirs"
    return [deploy_dir() / "tools"], f"the default ({DEPLOY_DIR_ENV} or the checkout's deploy/)"


PrincipalsOption = Annotated[
    Path | None,
    typer.Option(
        "--principals",
        envvar=PRINCIPALS_ENV,
        help="Principal directory (default: the one `up` gives the policy service, <deploy>/policy/principals.toml).",
        show_default=False,
    ),
]
AttributesOption = Annotated[
    Path | None,
    typer.Option(
        "--attributes",
        envvar=ATTRIBUTES_ENV,
        help="Principal and tool attributes (default: the ones `up` gives the policy service, "
        "<deploy>/policy/attributes.toml).",
        show_default=False,
    ),
]
