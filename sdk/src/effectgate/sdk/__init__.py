"""The agent SDK: :class:`ToolClient`, :func:`ended_as`, and every error a method of the client raises.

:func:`ended_as` tells how a call ended, a replay's stored outcome included; :func:`resolved_as`
what became of an ``uncertain`` call since (a replay carries its resolution: ``ran``, ``not_run`` or
``unknown``), :func:`resolution_note` says it in a sentence; :mod:`effectgate.sdk.errors` gives the
errors' hierarchy.
"""

from effectgate.contracts.bus.nats_credentials import CredentialsInvalid
from effectgate.contracts.replays import ended_as, resolution_note, resolved_as
from effectgate.contracts.tools.schemas import SchemaUnusable
from effectgate.sdk.client import ToolClient
from effectgate.sdk.errors import (
    ApprovalsNoAnswer,
    BusUnreachable,
    DuplicateRequest,
    GatewayStoreFull,
    RecordsNoAnswer,
    RegistryNoAnswer,
    RegistryUnavailable,
    ResultUnavailable,
    UnknownTool,
)
from effectgate.sdk.receipts import ReceiptKeyMissing
from effectgate.sdk.sealing import SealingKeyMissing

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "CredentialsInvalid",
    "DuplicateRequest",
    "GatewayStoreFull",
    "ReceiptKeyMissing",
    "RecordsNoAnswer",
    "RegistryNoAnswer",
    "RegistryUnavailable",
    "ResultUnavailable",
    "SchemaUnusable",
    "SealingKeyMissing",
    "ToolClient",
    "UnknownTool",
    "ended_as",
    "resolution_note",
    "resolved_as",
]
