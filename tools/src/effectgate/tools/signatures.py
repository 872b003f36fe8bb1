"""What each parameter of a tool's function is: an argument, the Context, the Secrets or a provided dependency."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args, get_origin

from effectgate.tools.context import PROVIDED, Context, Secrets
from effectgate.tools.errors import DeclarationError
from effectgate.tools.type_schemas import Argument

__all__ = ["Parameters", "hints_of", "parameters_of"]


@dataclass(frozen=True)
class Parameters:
    """A function's parameters by role (each by its name).

    Attributes:
        arguments: the call's arguments, in order (they make the input schema).
        context / secrets: the parameter receiving the :class:`Context` / :class:`Secrets`, if any.
        provided: parameter name to the type the host's dependencies provide.
        defaults: provided parameters' defaults, used when the host provides no such type.
    """

    arguments: tuple[Argument, ...] = ()
    context: str | None = None
    secrets: str | None = None
    provided: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)


def hints_of(function: Callable[..., Any], where: str) -> dict[str, Any]:
    """``function``'s resolved type hints, ``Annotated`` kept.

    Raises:
        DeclarationError: a hint names nothing importable.
    """
    try:
        return typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError) as error:
        raise DeclarationError(f"{where}: its type hints cannot be resolved: {error}") from None


def _provided_type(annotation: Any) -> Any | None:
    if get_origin(annotation) is Annotated and any(meta is PROVIDED for meta in annotation.__metadata__):
        return get_args(annotation)[0]
    return None


def parameters_of(function: Callable[..., Any], where: str, *, skip_first: bool, all_provided: bool) -> Parameters:
    """Sort ``function``'s parameters by role; ``all_provided``: every non-injected one is a dependency (``__init__``).

    Raises:
        DeclarationError: a ``*args`` / ``**kwargs`` or positional-only parameter, or one without a type hint.
    """
    hints = hints_of(function, where)
    listed = list(inspect.signature(function).parameters.values())[1 if skip_first else 0 :]
    found: dict[str, Any] = {"arguments": [], "provided": {}, "defaults": {}}
    for parameter in listed:
        _sort(parameter, hints, found, where, all_provided)
    return Parameters(**{**found, "arguments": tuple(found["arguments"])})


def _sort(
    parameter: inspect.Parameter, hints: dict[str, Any], found: dict[str, Any], where: str, all_provided: bool
) -> None:
    if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
        raise DeclarationError(f"{where}: parameter {parameter.name!r} must be an ordinary or keyword parameter")
    if parameter.name not in hints:
        raise DeclarationError(f"{where}: parameter {parameter.name!r} needs a type hint")
    annotation = hints[parameter.name]
    if annotation is Context or annotation is Secrets:
        found["context" if annotation is Context else "secrets"] = parameter.name
        return
    provided = _provided_type(annotation)
    if provided is not None or all_provided:
        found["provided"][parameter.name] = annotation if provided is None else provided
        if parameter.default is not parameter.empty:
            found["defaults"][parameter.name] = parameter.default
        return
    found["arguments"].append(Argument(parameter.name, annotation, parameter.default))
