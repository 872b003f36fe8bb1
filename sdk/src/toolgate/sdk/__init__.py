"""The agent SDK: :class:`ToolClient`."""

from toolgate.sdk.client import DuplicateRequest, RegistryUnavailable, SealingKeyMissing, ToolClient, UnknownTool

__all__ = ["DuplicateRequest", "RegistryUnavailable", "SealingKeyMissing", "ToolClient", "UnknownTool"]
