"""Errors of the registry service."""

from __future__ import annotations

from effectgate.contracts.errors import EffectgateError

__all__ = ["LookupRefused", "PublishRefused", "RegistryError"]


class RegistryError(EffectgateError):
    """Root of the registry's errors."""


class PublishRefused(RegistryError):
    """The descriptor was not published; nothing changed."""


class LookupRefused(RegistryError):
    """The lookup names a tool or version that cannot exist; nothing was read."""
