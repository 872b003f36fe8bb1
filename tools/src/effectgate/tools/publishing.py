"""The checks a generated descriptor passes before it is served or published.

The same rules as the registry's publish check (``effectgate.registry.domain.validate_descriptor``),
made of the contract functions it calls: names, SemVer, limits, the adapter, argument pointers,
and every schema valid, self-contained, with secret and file markers where they can be honoured.
"""

from __future__ import annotations

from effectgate.contracts.tools.descriptors import OPERATION_NAME, SEMVER, TOOL_NAME, ToolDescriptor, rate_limit_problem
from effectgate.contracts.tools.file_references import file_places
from effectgate.contracts.tools.references import reference_problem
from effectgate.contracts.tools.schemas import SchemaError, check_schema
from effectgate.contracts.tools.secret_arguments import secret_arguments
from effectgate.tools.errors import DeclarationError

__all__ = ["check_descriptor"]


def check_descriptor(descriptor: ToolDescriptor) -> None:
    """Refuse a descriptor the registry would refuse.

    Raises:
        DeclarationError: naming the tool and the field (``name``, ``version``, ``timeout_s``,
            ``rate_limit``, ``adapter``, ``operations.<op>.<field>``).
    """
    problem = _tool_problem(descriptor) or _operations_problem(descriptor)
    if problem:
        raise DeclarationError(f"{descriptor.name}: {problem}")


def _tool_problem(descriptor: ToolDescriptor) -> str | None:
    if not TOOL_NAME.match(descriptor.name):
        return f"name: {descriptor.name!r} must match {TOOL_NAME.pattern}"
    if not SEMVER.match(descriptor.version):
        return f"version: {descriptor.version!r} is not a semantic version"
    if not descriptor.timeout_s > 0:
        return f"timeout_s: must be above 0, got {descriptor.timeout_s!r}"
    if problem := rate_limit_problem(descriptor.rate_limit):
        return f"rate_limit.{problem}"
    found = reference_problem(descriptor)
    return found[1] if found else None


def _operations_problem(descriptor: ToolDescriptor) -> str | None:
    for name, spec in descriptor.operations.items():
        if not OPERATION_NAME.match(name):
            return f"operations.{name}: the name must match {OPERATION_NAME.pattern}"
        if spec.rate_limit is not None and (problem := rate_limit_problem(spec.rate_limit)):
            return f"operations.{name}.rate_limit.{problem}"
        for kind, schema in (("input_schema", spec.input_schema), ("output_schema", spec.output_schema)):
            try:
                check_schema(schema)
                if kind == "input_schema":
                    secret_arguments(schema)
                    file_places(schema)
            except SchemaError as error:
                return f"operations.{name}.{kind}: {error}"
    return None
