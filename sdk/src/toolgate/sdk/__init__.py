"""The agent SDK: :class:`ToolClient`."""

from toolgate.sdk.client import DuplicateRequest, RegistryUnavailable, ToolClient

__all__ = ["DuplicateRequest", "RegistryUnavailable", "ToolClient"]
