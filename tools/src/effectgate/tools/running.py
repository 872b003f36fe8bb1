"""One call's scope: its secrets, dependencies and tool instance, the operation run, a stream collected.

The scope opens when the call starts and closes when it ends, whatever the outcome: a tool class
is instantiated once per call (its ``__init__`` dependencies resolved) and disposed after it —
by its async context manager exit, else its ``aclose()``, else its ``close()``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from effectgate.contracts.errors import Problem
from effectgate.tools.context import Context, Secrets
from effectgate.tools.dependencies import Dependencies
from effectgate.tools.reading import DeclaredOperation, DeclaredTool
from effectgate.tools.secrets import SecretsProvider
from effectgate.tools.signatures import Parameters
from effectgate.tools.wrappers import ItemHook

__all__ = [
    "PROGRESS_INTERVAL_S",
    "CallScope",
    "DependencyUnavailable",
    "ItemReporter",
    "SecretUnavailable",
    "StreamBroken",
]

PROGRESS_INTERVAL_S = 0.25
"""Least time between two progress reports of a streaming call, seconds (the first item is reported at once)."""


class SecretUnavailable(Problem):
    """A secret the operation declares has no value: the call is refused before anything runs."""

    code = "secret_unavailable"


class DependencyUnavailable(Problem):
    """A dependency's factory failed: the tool did not run."""

    code = "dependency_unavailable"


class StreamBroken(Problem):
    """A streaming operation failed after ``items`` items; its cause is ``__cause__``."""

    def __init__(self, items: int, cause: BaseException) -> None:
        super().__init__(f"the stream failed after {items} items")
        self.items, self.cause = items, cause


@dataclass
class CallScope:
    """What one call resolved: its context, secrets (their values, to scrub) and exit stack."""

    tool: DeclaredTool
    operation: DeclaredOperation
    context: Context
    stack: AsyncExitStack
    dependencies: Dependencies
    secret_values: dict[str, str] = field(default_factory=dict)

    async def resolve_secrets(self, provider: SecretsProvider | None) -> None:
        """Resolve every secret the operation declares.

        Raises:
            SecretUnavailable: one has no value (or no provider is configured).
        """
        for name in self.operation.options.secrets:
            value = await provider.get(name) if provider is not None else None
            if value is None:
                raise SecretUnavailable(f"secret {name!r} of {self.tool.name} has no value")
            self.secret_values[name] = value

    async def fill(self, parameters: Parameters, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of one function: the call's arguments and what is injected."""
        filled = dict(arguments)
        if parameters.context:
            filled[parameters.context] = self.context
        if parameters.secrets:
            filled[parameters.secrets] = Secrets(self.secret_values)
        for name, kind in parameters.provided.items():
            if self.dependencies.provides(kind) or name not in parameters.defaults:
                filled[name] = await self._provided(kind)
        return filled

    async def _provided(self, kind: Any) -> Any:
        try:
            return await self.dependencies.resolve(kind, self.stack)
        except Exception as error:
            raise DependencyUnavailable(f"{kind!r} could not be provided: {type(error).__name__}: {error}") from error

    async def target(self) -> Callable[..., Any]:
        """The operation's callable: the function, or the method of a new instance (disposed with the scope)."""
        if not isinstance(self.tool.target, type):
            return self.operation.function
        init = self.tool.init or Parameters()
        instance = self.tool.target(**await self.fill(init, {}))
        await self._dispose_later(instance)
        bound: Callable[..., Any] = self.operation.function.__get__(instance)
        return bound

    async def _dispose_later(self, instance: Any) -> None:
        if isinstance(instance, AbstractAsyncContextManager):
            await self.stack.enter_async_context(instance)
        elif callable(getattr(instance, "aclose", None)):
            self.stack.push_async_callback(instance.aclose)
        elif callable(getattr(instance, "close", None)):
            self.stack.callback(instance.close)


async def call_operation(
    function: Callable[..., Any], kwargs: dict[str, Any], streaming: bool, on_item: Callable[[Any], Awaitable[None]]
) -> Any:
    """Run ``function(**kwargs)``: awaited, in a thread when sync, or its stream collected."""
    if streaming:
        return await collect(function(**kwargs), on_item)
    if inspect.iscoroutinefunction(function):
        return await function(**kwargs)
    return await asyncio.to_thread(function, **kwargs)


async def collect(stream: AsyncIterator[Any], on_item: Callable[[Any], Awaitable[None]]) -> list[Any]:
    """Every item of ``stream``; ``on_item`` sees each.

    Raises:
        StreamBroken: the stream raised; no item collected so far leaves this function.
    """
    items: list[Any] = []
    try:
        async for item in stream:
            items.append(item)
            await on_item(item)
    except Exception as error:
        raise StreamBroken(len(items), error) from error
    return items


class ItemReporter:
    """Feeds each item to the wrappers' hooks and reports progress, at most once per :data:`PROGRESS_INTERVAL_S`."""

    def __init__(self, hooks: list[ItemHook], progress: Callable[[int, str], Awaitable[None]]) -> None:
        self._hooks, self._progress = hooks, progress
        self.items, self._reported, self._last = 0, 0, 0.0

    async def __call__(self, item: Any) -> None:
        """Pass ``item`` to every hook, then report progress when due."""
        self.items += 1
        for hook in self._hooks:
            await hook(item)
        if self._reported == 0 or time.monotonic() - self._last >= PROGRESS_INTERVAL_S:
            await self.report()

    async def report(self) -> None:
        """Report the count of items so far (progress is best effort: its failure ends nothing)."""
        if self.items == self._reported:
            return
        self._reported, self._last = self.items, time.monotonic()
        try:
            await self._progress(self.items, "")
        except Exception:
            return
