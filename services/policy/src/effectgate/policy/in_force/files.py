"""Reading the policy service's optional data files (attributes, budgets)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from effectgate.policy.errors import PolicyInvalid

__all__ = ["load_optional"]

T = TypeVar("T")


def load_optional(path: Path, parse: Callable[[str], T], missing: Callable[[], T]) -> T:
    """Parse the UTF-8 file at ``path`` with ``parse``; ``missing()`` when there is no such file.

    Raises:
        PolicyInvalid: unreadable, not UTF-8, or refused by ``parse``; the reason starts
            with ``path``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return missing()
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}", path=str(path)) from exc
    try:
        return parse(text)
    except PolicyInvalid as exc:
        raise PolicyInvalid(f"{path}: {exc.reason}", path=str(path)) from exc
