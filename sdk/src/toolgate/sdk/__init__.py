"""The agent SDK: :class:`ToolClient`, and :func:`ended_as` (how a call ended, a replay's stored outcome included)."""

from toolgate.contracts.replays import ended_as
from toolgate.sdk.client import (
    ApprovalsNoAnswer,
    BusUnreachable,
    DuplicateRequest,
    GatewayStoreFull,
    RegistryUnavailable,
    SealingKeyMissing,
    ToolClient,
    UnknownTool,
)

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "DuplicateRequest",
    "GatewayStoreFull",
    "RegistryUnavailable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
    "ended_as",
]
