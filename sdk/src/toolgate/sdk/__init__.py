"""The agent SDK: :class:`ToolClient`."""

from toolgate.sdk.client import (
    BusUnreachable,
    DuplicateRequest,
    RegistryUnavailable,
    SealingKeyMissing,
    ToolClient,
    UnknownTool,
)

__all__ = [
    "BusUnreachable",
    "DuplicateRequest",
    "RegistryUnavailable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
]
