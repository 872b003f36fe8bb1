"""The agent SDK: :class:`ToolClient`."""

from toolgate.sdk.client import (
    ApprovalsNoAnswer,
    BusUnreachable,
    DuplicateRequest,
    RegistryUnavailable,
    SealingKeyMissing,
    ToolClient,
    UnknownTool,
)

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "DuplicateRequest",
    "RegistryUnavailable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
]
