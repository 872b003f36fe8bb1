"""Building the engine: a policy text over the registered tools, or the policy files.

:func:`build_engine` tries the text over the registered descriptors' vocabulary
(:mod:`effectgate.policy.cedar.vocabulary`), and over each other typing of a name two
operations type differently; :func:`load_policy` reads the policy, the principal
directory and the attributes from files first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.attributes import Attributes, load_attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.vocabulary import vocabulary_of
from effectgate.policy.errors import PolicyInvalid

__all__ = ["build_engine", "load_policy"]


def build_engine(
    policy_text: str, directory: PrincipalDirectory, attributes: Attributes, descriptors: Iterable[ToolDescriptor]
) -> PolicyEngine:
    """The engine for ``policy_text`` over the registered ``descriptors``' argument vocabulary.

    When the text does not build and some argument name is typed differently by two
    operations, it is tried again with that name typed the other way (each such name in
    turn): the rules, not one registered schema, decide which type the name has.

    Raises:
        PolicyInvalid: see :class:`PolicyEngine` (the first attempt's reason); a rule
            reading an argument no registered tool provides fails schema validation here.
    """
    vocabulary = vocabulary_of(descriptors)
    try:
        return PolicyEngine(policy_text, directory, attributes, vocabulary)
    except PolicyInvalid as first:
        for other in vocabulary.alternatives():
            with contextlib.suppress(PolicyInvalid):
                return PolicyEngine(policy_text, directory, attributes, other)
        raise first


def load_policy(
    policy_path: Path,
    directory_path: Path,
    attributes_path: Path | None = None,
    descriptors: Iterable[ToolDescriptor] = (),
) -> PolicyEngine:
    """Read the Cedar policy file, the principal directory and the attributes, and build the engine.

    Args:
        policy_path: Cedar policy text, e.g. ``deploy/policy/policy.cedar``.
        directory_path: principal directory TOML, e.g. ``deploy/policy/principals.toml``.
        attributes_path: attributes TOML, e.g. ``deploy/policy/attributes.toml`` (missing:
            no attributes).
        descriptors: the registered tools whose arguments policies may read.

    Raises:
        PolicyInvalid: a file is missing, unreadable, not UTF-8 or invalid; ``path``
            names it.
    """
    directory_text, policy_text = _read(directory_path), _read(policy_path)
    attributes = load_attributes(attributes_path) if attributes_path is not None else Attributes()
    try:
        directory = PrincipalDirectory.from_toml(directory_text)
    except DirectoryInvalid as exc:
        raise PolicyInvalid(f"{directory_path}: {exc.reason}", path=str(directory_path)) from exc
    try:
        return build_engine(policy_text, directory, attributes, descriptors)
    except PolicyInvalid as exc:
        raise PolicyInvalid(f"{policy_path}: {exc.reason}", path=str(policy_path), problems=exc.problems) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}", path=str(path)) from exc
