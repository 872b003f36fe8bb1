"""Errors of the registry service.

::

    RegistryError(reason_code, reason)
    └── PublishRefused   a descriptor that may not be published
                         (malformed, invalid_name, invalid_version, schema_invalid,
                         version_immutable)
"""

from __future__ import annotations

__all__ = ["PublishRefused", "RegistryError"]


class RegistryError(Exception):
    """Root of the registry's errors.

    Attributes:
        reason_code: machine-readable reason.
        reason: human-readable reason naming what was wrong.
    """

    def __init__(self, reason_code: str, reason: str) -> None:
        super().__init__(f"{reason_code}: {reason}")
        self.reason_code = reason_code
        self.reason = reason


class PublishRefused(RegistryError):
    """The descriptor was not published; nothing changed."""
