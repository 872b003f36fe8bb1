"""A declared tool read from its decorators: its operations' specs, parameters and how to call them.

Reading builds nothing: no tool class is instantiated and no dependency resolved.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor
from effectgate.contracts.tools.hosting import ReconcileAnswer
from effectgate.contracts.tools.operation_checks import SECRET_NAME
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.tools.declaring import OPERATION, TOOL, OperationOptions, ToolOptions, is_ignored
from effectgate.tools.errors import DeclarationError
from effectgate.tools.narrowing import narrowed
from effectgate.tools.signatures import Parameters, hints_of, parameters_of
from effectgate.tools.type_schemas import Mode, TypeShape, input_schema, output_type, shape_of, with_defs

__all__ = ["DeclaredOperation", "DeclaredTool", "declared", "is_tool"]

"""A secret's name: one environment variable (upper-cased, after a prefix) and one file name."""


@dataclass(frozen=True)
class DeclaredOperation:
    """One operation as declared: its spec and what calling it needs."""

    name: str
    function: Callable[..., Any]
    options: OperationOptions
    parameters: Parameters
    shapes: dict[str, TypeShape]
    streaming: bool
    wraps_effect: bool
    result_type: Any
    spec: OperationSpec

    @property
    def writes(self) -> bool:
        """Whether the operation may change anything (its side effect is not ``READ_ONLY``)."""
        return self.spec.side_effect_class is not SideEffectClass.READ_ONLY


@dataclass(frozen=True)
class DeclaredTool:
    """One tool as declared: a class (instantiated per call) or a function."""

    name: str
    version: str
    description: str
    timeout_s: float
    rate_limit: RateLimit
    secrets: tuple[str, ...]
    target: Any
    init: Parameters | None
    operations: dict[str, DeclaredOperation]

    def descriptor(self, worker: str) -> ToolDescriptor:
        """The tool's descriptor, reached through the ``python:<worker>`` adapter."""
        return ToolDescriptor(
            name=self.name,
            version=self.version,
            adapter=f"python:{worker}",
            operations={name: op.spec for name, op in self.operations.items()},
            timeout_s=self.timeout_s,
            rate_limit=self.rate_limit,
            description=self.description,
            secrets=self.secrets,
        )


def is_tool(target: Any) -> bool:
    """Whether ``target`` itself carries ``@tool`` (not only a base class)."""
    own = vars(target) if isinstance(target, type) else getattr(target, "__dict__", {})
    return TOOL in own


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _summary(item: Any) -> str:
    return (inspect.getdoc(item) or "").split("\n\n")[0].strip()


def declared(target: Any) -> DeclaredTool:
    """Read the tool ``target`` declares.

    Raises:
        DeclarationError: not a ``@tool``, marked ``@ignore``, or any declaration rule broken
            (``docs/reference/tools-api.md``), naming the tool, the operation and the option.
    """
    if not is_tool(target) or is_ignored(target):
        why = "is marked @ignore" if is_tool(target) else "is not declared with @tool"
        raise DeclarationError(f"{getattr(target, '__qualname__', target)!r} {why}")
    options: ToolOptions = vars(target)[TOOL]
    name = options.name or _snake(target.__name__)
    is_class = isinstance(target, type)
    operations = _class_operations(target, name, options) if is_class else _function_operation(target, name, options)
    _check_reconciles(name, operations)
    return _assemble(target, name, options, operations, is_class)


def _assemble(
    target: Any, name: str, options: ToolOptions, operations: dict[str, DeclaredOperation], is_class: bool
) -> DeclaredTool:
    secrets = tuple(dict.fromkeys(secret for op in operations.values() for secret in op.options.secrets))
    for secret in secrets:
        if not SECRET_NAME.match(secret):
            raise DeclarationError(f"{name}: secret name {secret!r} must match {SECRET_NAME.pattern}")
    own_init = is_class and target.__init__ is not object.__init__
    init = parameters_of(target.__init__, f"{name}.__init__", skip_first=True, all_provided=True) if own_init else None
    calls, period_s = options.rate_limit or (60, 60.0)
    return DeclaredTool(
        name=name, version=options.version, description=options.description or _summary(target),
        timeout_s=options.timeout_s, rate_limit=RateLimit(calls=calls, period_s=period_s), secrets=secrets,
        target=target, init=init if init is not None and (init.provided or init.context or init.secrets) else None,
        operations=operations,
    )  # fmt: skip


def _class_operations(target: type, tool: str, options: ToolOptions) -> dict[str, DeclaredOperation]:
    found: dict[str, DeclaredOperation] = {}
    for attribute, member in vars(target).items():
        mark = getattr(member, OPERATION, None)
        if not isinstance(mark, OperationOptions) or is_ignored(member):
            continue
        effective = narrowed(options.defaults, mark, f"{tool}.{mark.name or attribute}")
        operation = _operation(tool, mark.name or attribute, member, effective, method=True)
        if operation.name in found:
            raise DeclarationError(f"{tool}: two methods declare the operation {operation.name!r}")
        found[operation.name] = operation
    if not found:
        raise DeclarationError(f"{tool}: a tool class needs at least one @operation method")
    return found


def _function_operation(target: Callable[..., Any], tool: str, options: ToolOptions) -> dict[str, DeclaredOperation]:
    name = options.defaults.name or target.__name__
    return {name: _operation(tool, name, target, options.defaults, method=False)}


def _operation(
    tool: str, name: str, function: Callable[..., Any], options: OperationOptions, *, method: bool
) -> DeclaredOperation:
    where = f"{tool}.{name}"
    if options.description is None:
        options = replace(options, description=_summary(function))
    parameters = parameters_of(function, where, skip_first=method, all_provided=False)
    shapes = {
        argument.name: _shape(argument.annotation, f"{where}: parameter {argument.name!r}")
        for argument in parameters.arguments
    }
    streaming = inspect.isasyncgenfunction(function)
    result_type, wraps_effect = output_type(_return_hint(function, where), streaming)
    spec = _spec(
        where,
        options,
        input_schema(list(parameters.arguments), where),
        _output(options, result_type, streaming, where),
        streaming,
    )
    return DeclaredOperation(
        name=name, function=function, options=options, parameters=parameters, shapes=shapes, streaming=streaming,
        wraps_effect=wraps_effect, result_type=result_type, spec=spec,
    )  # fmt: skip


def _return_hint(function: Callable[..., Any], where: str) -> Any:
    hints = hints_of(function, where)
    if "return" not in hints:
        raise DeclarationError(f"{where}: the return annotation is missing (it makes the output schema)")
    return hints["return"]


def _shape(annotation: Any, where: str, mode: Mode = "validation") -> TypeShape:
    """:func:`shape_of` ``annotation``, its refusal naming ``where`` (the tool, the operation, the parameter)."""
    try:
        return shape_of(annotation, mode)
    except DeclarationError as error:
        raise DeclarationError(f"{where}: {error}") from None


def _output(options: OperationOptions, result_type: Any, streaming: bool, where: str) -> dict[str, Any]:
    if options.output is not None:
        return with_defs(options.output, {})
    shape = _shape(result_type, f"{where}: the return type", "serialization")
    schema = {"type": "array", "items": shape.schema} if streaming else shape.schema
    return with_defs(schema, shape.defs)


def _spec(
    where: str, options: OperationOptions, inputs: dict[str, Any], outputs: dict[str, Any], streaming: bool
) -> OperationSpec:
    if options.side_effect is None or options.risk is None:
        missing = "side_effect" if options.side_effect is None else "risk"
        raise DeclarationError(f"{where}: {missing} is not declared (on the operation or its class)")
    writes = options.side_effect is not SideEffectClass.READ_ONLY
    if options.retry is not None and writes and not options.idempotent_at_target:
        raise DeclarationError(f"{where}: retry on a write needs idempotent_at_target=True (any other write runs once)")
    rate = RateLimit(calls=options.rate_limit[0], period_s=options.rate_limit[1]) if options.rate_limit else None
    return OperationSpec(
        input_schema=inputs, output_schema=outputs, side_effect_class=options.side_effect, risk_tier=options.risk,
        description=options.description or "", rate_limit=rate, open_world=bool(options.open_world),
        destination=options.destination, amount=options.amount, cost=options.cost,
        concurrency_safe=options.concurrency_safe is not False, serialize_by=options.serialize_by,
        retry=options.retry.policy() if options.retry else None,
        idempotent_at_target=bool(options.idempotent_at_target), reconcile=options.reconcile, streaming=streaming,
    )  # fmt: skip


def _check_reconciles(tool: str, operations: dict[str, DeclaredOperation]) -> None:
    for name, operation in operations.items():
        target = operation.spec.reconcile
        if target is None:
            continue
        found = operations.get(target)
        if found is None or found.writes or found.result_type is not ReconcileAnswer or target == name:
            raise DeclarationError(
                f"{tool}.{name}: reconcile names {target!r}, which must be another READ_ONLY operation of "
                "the same tool returning Reconciled"
            )
