"""How listing commands print: ``--json`` for scripts, and "did you mean" for a mistyped name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
import typer

__all__ = ["AsJson", "did_you_mean", "print_json"]

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON (one document on stdout) instead of text.")]


def print_json(value: Any) -> None:
    """Print ``value`` (msgspec-encodable: structs, dicts, lists) as indented JSON on stdout."""
    typer.echo(msgspec.json.format(msgspec.json.encode(value), indent=2).decode())


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) for the known names close to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(match) for match in close)}?" if close else ""
