"""What a host provides to its tools: a type's factory, called once per call that needs it.

A factory is sync or async; a value it returns that is an async (or sync) context manager is
entered, and exited when the call ends, so a connection opened for a call is closed after it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, AsyncExitStack
from typing import Any, TypeVar

__all__ = ["Dependencies"]

T = TypeVar("T")


class Dependencies:
    """Type → factory, configured by the host (``Dependencies().provide(Ledger, open_ledger)``)."""

    def __init__(self) -> None:
        self._factories: dict[Any, Callable[[], Any]] = {}

    def provide(self, kind: type[T], factory: Callable[[], Any]) -> Dependencies:
        """Provide ``kind`` by calling ``factory()`` (returns ``self``, to chain)."""
        self._factories[kind] = factory
        return self

    def provides(self, kind: Any) -> bool:
        """Whether ``kind`` has a factory."""
        return kind in self._factories

    async def resolve(self, kind: Any, stack: AsyncExitStack) -> Any:
        """A new ``kind`` for one call; a context manager is entered on ``stack`` (exited with it).

        Raises:
            KeyError: ``kind`` has no factory.
            Exception: whatever the factory raises.
        """
        value = self._factories[kind]()
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, AbstractAsyncContextManager):
            return await stack.enter_async_context(value)
        if isinstance(value, AbstractContextManager):
            return stack.enter_context(value)
        return value
