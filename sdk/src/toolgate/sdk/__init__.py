"""The agent SDK: :class:`ToolClient`."""

from toolgate.sdk.client import RegistryUnavailable, ToolClient

__all__ = ["RegistryUnavailable", "ToolClient"]
