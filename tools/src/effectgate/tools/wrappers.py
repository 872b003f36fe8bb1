"""Wrappers around every call: surface-level (no caller seen) and caller-level (inside the call's scope).

A wrapper is ``async def wrapper(invocation) -> result``: it calls ``await invocation.run()``
(the next layer), which returns the *collected* result — a streaming operation's full list of
items — so one wrapper covers the complete and the streaming call alike; a wrapper that wants
the items as they come registers ``invocation.on_item(hook)``. Wrappers apply in the order
registered, the last registered outermost. Surface wrappers run outside caller wrappers; a
surface wrapper may also define ``listing(served) -> served`` to narrow what the worker serves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from effectgate.contracts.tools.hosting import ServedTool
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.tools.context import Context

__all__ = ["CallerWrapper", "Invocation", "ItemHook", "ListingCap", "SurfaceWrapper", "layered", "listed"]

ItemHook = Callable[[Any], Awaitable[None]]
"""Sees each item of a streaming call as it is yielded."""
Run = Callable[[], Awaitable[Any]]


@dataclass(frozen=True, kw_only=True)
class Invocation:
    """One call as a wrapper sees it.

    Attributes:
        tool / operation / arguments: what runs (arguments as the call sent them, validated).
        side_effect: the operation's declared side effect.
        streaming: the operation yields items; :meth:`run` returns their list.
        context: who calls; ``None`` for a surface wrapper (which sees no caller).
    """

    tool: str
    operation: str
    arguments: Mapping[str, Any]
    side_effect: SideEffectClass
    streaming: bool
    context: Context | None = None
    hooks: list[ItemHook] = field(default_factory=list, repr=False)
    _next: Run | None = field(default=None, repr=False)

    async def run(self) -> Any:
        """Run the next layer; returns the result (a streaming call's collected items)."""
        if self._next is None:
            raise RuntimeError("this invocation has no next layer")
        return await self._next()

    def on_item(self, hook: ItemHook) -> None:
        """Call ``hook(item)`` for each item a streaming call yields (never for a complete call)."""
        self.hooks.append(hook)


class CallerWrapper(Protocol):
    """Wraps a call inside its scope: ``invocation.context`` is the caller's."""

    async def __call__(self, invocation: Invocation, /) -> Any:
        """Return ``await invocation.run()`` (or refuse, or change the result)."""
        ...


class SurfaceWrapper(Protocol):
    """Wraps every call before any caller is known (``invocation.context`` is ``None``)."""

    async def __call__(self, invocation: Invocation, /) -> Any:
        """Return ``await invocation.run()`` (or refuse, or change the result)."""
        ...


def layered(wrappers: Sequence[CallerWrapper | SurfaceWrapper], invocation: Invocation, innermost: Run) -> Run:
    """``innermost`` wrapped by ``wrappers``, the first registered innermost and the last outermost."""
    run = innermost
    for wrapper in wrappers:
        run = _layer(wrapper, replace(invocation, _next=run))
    return run


def _layer(wrapper: CallerWrapper | SurfaceWrapper, invocation: Invocation) -> Run:
    async def run() -> Any:
        return await wrapper(invocation)

    return run


def listed(wrappers: Sequence[SurfaceWrapper], served: tuple[ServedTool, ...]) -> tuple[ServedTool, ...]:
    """``served`` as the surface wrappers' ``listing`` narrow it (the last registered applied last)."""
    for surface in wrappers:
        listing = getattr(surface, "listing", None)
        if listing is not None:
            served = tuple(listing(served))
    return served


class ListingCap:
    """A surface wrapper serving at most ``limit`` tools (the first by name); calls pass through."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def listing(self, served: tuple[ServedTool, ...]) -> tuple[ServedTool, ...]:
        """The first ``limit`` tools by name."""
        return tuple(sorted(served, key=lambda item: item.tool)[: self.limit])

    async def __call__(self, invocation: Invocation, /) -> Any:
        """Run the call unchanged."""
        return await invocation.run()
