"""The decorators that declare Python tools: ``@tool``, ``@operation``, ``@ignore`` and ``Retry``.

The decorators only record options on what they decorate (they return it unchanged); the
declaration is read when a :class:`~effectgate.tools.Toolbox` is built
(:mod:`effectgate.tools.reading`). Options left ``None`` are not set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict, TypeVar, Unpack, overload

from effectgate.contracts.tools.descriptors import RetryPolicy
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass

__all__ = ["IGNORED", "OPERATION", "TOOL", "OperationOptions", "Retry", "ToolOptions", "ignore", "operation", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
TOOL = "__effectgate_tool__"
OPERATION = "__effectgate_operation__"
IGNORED = "__effectgate_ignore__"


@dataclass(frozen=True, kw_only=True)
class Retry:
    """How the executor retries this operation's transient faults (``contracts`` :class:`RetryPolicy`).

    Attributes:
        attempts: calls in all, the first included (1 to 10).
        backoff_s: wait before the second call, seconds; doubled for each later one.
        max_backoff_s: longest wait between two calls, seconds.
        on: the :class:`~effectgate.tools.Fault` codes retried (empty: every retryable fault).
    """

    attempts: int = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    on: tuple[str, ...] = ()

    def policy(self) -> RetryPolicy:
        """The descriptor's :class:`RetryPolicy`."""
        return RetryPolicy(
            attempts=self.attempts, backoff_s=self.backoff_s, max_backoff_s=self.max_backoff_s, on=self.on
        )


@dataclass(frozen=True, kw_only=True)
class OperationOptions:
    """What an operation declares (on ``@operation``, or as defaults on a class's ``@tool``)."""

    name: str | None = None
    description: str | None = None
    side_effect: SideEffectClass | None = None
    risk: RiskTier | None = None
    rate_limit: tuple[int, float] | None = None
    concurrency_safe: bool | None = None
    serialize_by: str | None = None
    retry: Retry | None = None
    idempotent_at_target: bool | None = None
    reconcile: str | None = None
    open_world: bool | None = None
    destination: str | None = None
    amount: str | None = None
    cost: float | str | None = None
    secrets: tuple[str, ...] = ()
    output: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class ToolOptions:
    """What ``@tool`` declares: the tool's own options and its operations' defaults (``defaults``)."""

    name: str | None = None
    version: str = "1.0.0"
    description: str | None = None
    timeout_s: float = 30.0
    rate_limit: tuple[int, float] | None = None
    defaults: OperationOptions = field(default_factory=OperationOptions)


_TOOL_ONLY = ("name", "version", "timeout_s")


def _split(options: dict[str, Any]) -> ToolOptions:
    """Tool-level options apart from the operations' (``operation=`` names a function tool's operation)."""
    own = {key: options.pop(key) for key in _TOOL_ONLY if key in options}
    description, rate = options.get("description"), options.pop("rate_limit", None)
    operation_name = options.pop("operation", None)
    known = {f.name for f in fields(OperationOptions)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(f"@tool got unknown options: {', '.join(unknown)}")
    defaults = OperationOptions(name=operation_name, **options)
    return ToolOptions(**own, description=description, rate_limit=rate, defaults=defaults)


@overload
def tool(target: F, /) -> F: ...
@overload
def tool(target: None = None, /, **options: Any) -> Callable[[F], F]: ...
def tool(target: Any = None, /, **options: Any) -> Any:
    """Declare a tool: a class (its ``@operation`` methods) or a function (one operation).

    Options (every one optional but ``side_effect`` and ``risk``, which a class or its methods
    must declare): ``name`` (default: the class or function name in snake_case), ``version``
    (SemVer, default ``"1.0.0"``), ``description`` (default: the docstring's first paragraph),
    ``timeout_s``, ``rate_limit=(calls, period_s)``, ``secrets`` (names), ``operation`` (a
    function tool's operation name, default the function's), and every :func:`operation` option
    (on a class, a default its methods narrow: ``docs/reference/tools-api.md``).

    Raises:
        TypeError: an unknown option.
    """
    declared = _split(dict(options))

    def mark(item: F) -> F:
        setattr(item, TOOL, declared)
        return item

    return mark(target) if target is not None else mark


class OperationKeywords(TypedDict, total=False):
    """The options of :func:`operation` (each described in ``docs/reference/tools-api.md``)."""

    name: str
    description: str
    side_effect: SideEffectClass
    risk: RiskTier
    rate_limit: tuple[int, float]
    concurrency_safe: bool
    serialize_by: str
    retry: Retry
    idempotent_at_target: bool
    reconcile: str
    open_world: bool
    destination: str
    amount: str
    cost: float | str
    secrets: tuple[str, ...]
    output: dict[str, Any]


@overload
def operation(target: F, /) -> F: ...
@overload
def operation(target: None = None, /, **options: Unpack[OperationKeywords]) -> Callable[[F], F]: ...
def operation(target: Any = None, /, **options: Any) -> Any:
    """Declare a method of a ``@tool`` class an operation (``docs/reference/tools-api.md`` lists each option).

    ``rate_limit`` here is the operation's own budget; ``reconcile`` names a ``READ_ONLY``
    operation of the same tool; ``output`` replaces the schema derived from the return annotation.

    Raises:
        TypeError: an unknown option.
    """
    unknown = sorted(set(options) - set(OperationKeywords.__annotations__))
    if unknown:
        raise TypeError(f"@operation got unknown options: {', '.join(unknown)}")
    declared = OperationOptions(**{**options, "secrets": tuple(options.get("secrets", ()))})

    def mark(method: F) -> F:
        setattr(method, OPERATION, declared)
        return method

    return mark(target) if target is not None else mark


def ignore(target: F) -> F:
    """Leave a class or function out of scanning and a method out of its class's operations."""
    setattr(target, IGNORED, True)
    return target


def is_ignored(target: Any) -> bool:
    """Whether ``target`` carries :func:`ignore` (its own mark, not one inherited from a base class)."""
    own = vars(target) if isinstance(target, type) else getattr(target, "__dict__", {})
    return bool(own.get(IGNORED, False))
