"""Errors of the registry service.

::

    RegistryError(reason_code, reason)
    └── PublishRefused   a descriptor that may not be published
                         (malformed, invalid_name, invalid_version, invalid_adapter,
                         invalid_pointer, schema_invalid, version_immutable,
                         no_free_version, descriptor_too_large)
    └── LookupRefused    a lookup naming what cannot exist (invalid_tool, invalid_version)
"""

from __future__ import annotations

from toolgate.contracts.errors import ToolgateError

__all__ = ["LookupRefused", "PublishRefused", "RegistryError"]


class RegistryError(ToolgateError):
    """Root of the registry's errors."""


class PublishRefused(RegistryError):
    """The descriptor was not published; nothing changed."""


class LookupRefused(RegistryError):
    """The lookup names a tool or version that cannot exist; nothing was read."""
