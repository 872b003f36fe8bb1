"""Where a worker finds its tools' secrets at call time, and how their values leave no answer.

A descriptor lists secret names only (``ToolDescriptor.secrets``); the values are resolved for
each call by a :class:`SecretsProvider`, and every resolved value is replaced by
:data:`REDACTED` in the answer's result, reason and effect id. A literal replacement of the
known values, not ``effectgate.shared.secrets.Redactor``: that one needs the shared package
(a bus framework, Redis, OpenTelemetry, a detector library) and ignores values under eight
characters, where a tool's own secret is known exactly and is removed whatever its length.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = ["REDACTED", "EnvironmentSecrets", "FileSecrets", "SecretsProvider", "scrubber"]

REDACTED = "[REDACTED]"


class SecretsProvider(Protocol):
    """Resolves one secret by name at call time."""

    async def get(self, name: str) -> str | None:
        """The value of secret ``name``, or ``None`` when it has none (the call is then refused)."""
        ...


class EnvironmentSecrets:
    """Secrets from environment variables: ``<prefix><NAME>`` (the name upper-cased).

    Args:
        prefix: put before each name (default ``EFFECTGATE_SECRET_``).
        environ: the variables (default ``os.environ``, read at each call).
    """

    def __init__(self, prefix: str = "EFFECTGATE_SECRET_", environ: Mapping[str, str] | None = None) -> None:
        self._prefix = prefix
        self._environ = environ

    async def get(self, name: str) -> str | None:
        """The variable's value; ``None`` when it is unset or empty."""
        environ = os.environ if self._environ is None else self._environ
        return environ.get(f"{self._prefix}{name.upper()}") or None


class FileSecrets:
    """Secrets from a directory holding one file per name (as mounted by Kubernetes or Docker secrets).

    A value is the file's text without its trailing line break; the file is read at each call.
    """

    def __init__(self, directory: str | Path) -> None:
        self._directory = Path(directory)

    async def get(self, name: str) -> str | None:
        """The file's text; ``None`` when there is no such file or it is empty."""
        path = self._directory / name
        if path.name != name or not path.is_file():
            return None
        return path.read_text(encoding="utf-8").rstrip("\r\n") or None


def scrubber(values: Iterable[str]) -> Callable[[Any], Any]:
    """A function returning a copy of a JSON-like value with each of ``values`` replaced by :data:`REDACTED`."""
    known = sorted({value for value in values if value}, key=len, reverse=True)
    if not known:
        return lambda value: value
    pattern = re.compile("|".join(map(re.escape, known)))

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(REDACTED, value)
        if isinstance(value, dict):
            return {scrub(key): scrub(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [scrub(item) for item in value]
        return value

    return scrub
