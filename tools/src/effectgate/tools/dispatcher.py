"""The dispatcher: answers a worker's verified calls by running the tools of one :class:`Toolbox`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import msgspec

from effectgate.contracts.tools.descriptors import descriptor_digest
from effectgate.contracts.tools.hosting import ReconcileAnswer, ServedTool, WorkerAnswer, WorkerCall
from effectgate.contracts.tools.schemas import first_error, first_error_pointer
from effectgate.contracts.tools.secret_arguments import secret_arguments
from effectgate.tools.answering import Progress
from effectgate.tools.context import Context, Effect
from effectgate.tools.dependencies import Dependencies
from effectgate.tools.errors import DeclarationError
from effectgate.tools.outcomes import OutputInvalid, ended, failure, refused
from effectgate.tools.reading import DeclaredOperation, DeclaredTool
from effectgate.tools.running import CallScope, ItemReporter, call_operation
from effectgate.tools.secrets import SecretsProvider, scrubber
from effectgate.tools.toolbox import Toolbox
from effectgate.tools.type_schemas import jsonable
from effectgate.tools.wrappers import CallerWrapper, Invocation, SurfaceWrapper, layered, listed

__all__ = ["Dispatcher"]


class Dispatcher:
    """Implements :class:`effectgate.tools.answering.Answering` for the tools of ``toolbox``.

    Args:
        toolbox: the declared tools.
        secrets: resolves the secrets tools declare (``None``: a call needing one is refused).
        dependencies: provides the types tools ask for.
        surface / caller: wrappers (:mod:`effectgate.tools.wrappers`), the last registered outermost.

    Raises:
        DeclarationError: a tool asks for a type ``dependencies`` does not provide (and has no default).
    """

    def __init__(
        self,
        toolbox: Toolbox,
        *,
        secrets: SecretsProvider | None = None,
        dependencies: Dependencies | None = None,
        surface: Sequence[SurfaceWrapper] = (),
        caller: Sequence[CallerWrapper] = (),
    ) -> None:
        self._worker, self._tools = toolbox.worker, toolbox.tools
        self._secrets, self._dependencies = secrets, dependencies or Dependencies()
        self._surface, self._caller = tuple(surface), tuple(caller)
        for tool in self._tools.values():
            _check_provided(tool, self._dependencies)
        every = tuple(
            ServedTool(tool=d.name, version=d.version, digest=descriptor_digest(d)) for d in toolbox.descriptors()
        )
        self._served = listed(self._surface, every)
        self._digests = {served.tool: served.digest for served in self._served}

    def served(self) -> tuple[ServedTool, ...]:
        """Every tool served, with its descriptor's digest (as the surface wrappers' listings leave them)."""
        return self._served

    async def answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        """Run ``call`` and say how it ended (:class:`~effectgate.tools.answering.Answering`); never raises."""
        answer = await self._answer(call, progress)
        return msgspec.structs.replace(answer, worker=self._worker)

    async def _answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        tool = self._tools.get(call.tool) if call.tool in self._digests else None
        if tool is None:
            return refused(call, "unknown_tool", f"this worker serves no tool {call.tool!r}")
        if call.descriptor_digest != self._digests[tool.name]:
            served = self._digests[tool.name]
            reason = (
                f"the call binds {call.descriptor_digest}; this worker serves {tool.name}@{tool.version} as {served}"
            )
            return refused(call, "descriptor_mismatch", reason)
        operation = tool.operations.get(call.operation)
        if operation is None:
            return refused(call, "unknown_operation", f"{tool.name} has no operation {call.operation!r}")
        converted = _converted(operation, call.arguments)
        if isinstance(converted, str):
            return refused(call, "invalid_arguments", converted)
        remaining_s = (call.context.deadline - datetime.now(UTC)).total_seconds()
        if remaining_s <= 0:
            return refused(
                call, "deadline_passed", f"the call's deadline {call.context.deadline.isoformat()} has passed"
            )
        return await self._run(call, tool, operation, converted, remaining_s, progress)

    async def _run(
        self, call: WorkerCall, tool: DeclaredTool, operation: DeclaredOperation, arguments: dict[str, Any],
        remaining_s: float, progress: Progress,
    ) -> WorkerAnswer:  # fmt: skip
        secret_values: dict[str, str] = {}
        timer = asyncio.timeout(remaining_s)
        try:
            async with timer:
                raw = await self._layers(call, tool, operation, arguments, secret_values, progress)
            answer = _ok(call, tool, operation, raw)
        except Exception as error:
            answer = failure(call, operation, error, remaining_s if timer.expired() else None)
        return _scrubbed(answer, secret_values.values())

    async def _layers(
        self, call: WorkerCall, tool: DeclaredTool, operation: DeclaredOperation, arguments: dict[str, Any],
        secret_values: dict[str, str], progress: Progress,
    ) -> Any:  # fmt: skip
        invocation = Invocation(
            tool=tool.name, operation=operation.name, arguments=call.arguments,
            side_effect=operation.spec.side_effect_class, streaming=operation.streaming,
        )  # fmt: skip

        async def in_scope() -> Any:
            async with AsyncExitStack() as stack:
                scope = CallScope(tool, operation, Context.of(call), stack, self._dependencies, secret_values)
                await scope.resolve_secrets(self._secrets)
                reporter = ItemReporter(invocation.hooks, progress)

                async def core() -> Any:
                    function = await scope.target()
                    kwargs = await scope.fill(operation.parameters, arguments)
                    result = await call_operation(function, kwargs, operation.streaming, reporter)
                    await reporter.report()
                    return result

                return await layered(self._caller, replace(invocation, context=scope.context), core)()

        return await layered(self._surface, invocation, in_scope)()


def _check_provided(tool: DeclaredTool, dependencies: Dependencies) -> None:
    needs = [(tool.init, "__init__")] + [(op.parameters, op.name) for op in tool.operations.values()]
    for parameters, where in needs:
        if parameters is None:
            continue
        for name, kind in parameters.provided.items():
            if not dependencies.provides(kind) and name not in parameters.defaults:
                raise DeclarationError(
                    f"{tool.name}.{where}: parameter {name!r} needs a {kind!r} no dependency provides"
                )


def _converted(operation: DeclaredOperation, arguments: Mapping[str, Any]) -> dict[str, Any] | str:
    """The arguments as the operation's types, or what is wrong with them (``"<pointer>: <message>"``)."""
    schema = operation.spec.input_schema
    problem = first_error(schema, dict(arguments))
    if problem is not None:
        return f"{first_error_pointer(schema, dict(arguments))}: invalid" if secret_arguments(schema) else problem
    try:
        return {name: operation.shapes[name].convert(value) for name, value in arguments.items()}
    except (ValueError, TypeError, msgspec.ValidationError) as error:
        return f"the arguments do not convert to the operation's types: {str(error).splitlines()[0]}"


def _ok(call: WorkerCall, tool: DeclaredTool, operation: DeclaredOperation, raw: Any) -> WorkerAnswer:
    """The ``ok`` answer of ``raw``, converted to JSON and checked against the output schema.

    Raises:
        OutputInvalid: not JSON, refused by the output schema, or a reconcile operation's result no ``Reconciled``.
    """
    effect_id = None
    if operation.wraps_effect and isinstance(raw, Effect):
        raw, effect_id = raw.result, raw.effect_id
    try:
        result = jsonable(raw)
    except (TypeError, ValueError) as error:
        raise OutputInvalid(f"the result is not JSON: {error}") from None
    if problem := first_error(operation.spec.output_schema, result):
        raise OutputInvalid(f"the output schema refuses the result at {problem}")
    if _reconciles(tool, operation):
        try:
            msgspec.convert(result, ReconcileAnswer)
        except msgspec.ValidationError as error:
            raise OutputInvalid(f"a reconcile operation returns Reconciled: {error}") from None
    return ended(call, result, effect_id)


def _reconciles(tool: DeclaredTool, operation: DeclaredOperation) -> bool:
    return any(other.spec.reconcile == operation.name for other in tool.operations.values())


def _scrubbed(answer: WorkerAnswer, values: Any) -> WorkerAnswer:
    """``answer`` with each resolved secret value replaced by ``[REDACTED]`` in result, reason, code and effect id."""
    scrub = scrubber(values)
    return msgspec.structs.replace(
        answer,
        result=scrub(answer.result),
        reason=scrub(answer.reason),
        reason_code=scrub(answer.reason_code),
        effect_id=scrub(answer.effect_id),
    )
