"""Bodies of the registry's requests: ``tg.registry.publish``, ``tg.registry.get``, ``tg.registry.list``.

Every one is answered with a :class:`RegistryReply`; ``tg.registry.list`` reads no body
(:class:`~effectgate.contracts.bus.catalog.Rpc`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.tool_states import ToolState

__all__ = ["GetQuery", "PublishRequest", "RegistryReply"]


class GetQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.registry.get``: a tool and an exact version, or ``None`` for the latest."""

    tool: str
    version: str | None = None


class PublishRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.registry.publish``: a descriptor and the operator's detached signature of it.

    Attributes:
        descriptor: the tool descriptor as JSON.
        signature: base64 Ed25519 signature of its RFC 8785 canonical JSON by the operator key
            (:func:`effectgate.contracts.integrity.signing.sign_value`; ``effectgate tools publish`` makes it).
    """

    descriptor: dict[str, Any]
    signature: str


class RegistryReply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Answer of every registry request.

    ``states``: ``list``: every recorded tool state, by tool name
    (:mod:`effectgate.contracts.tools.tool_states`): each listed tool's that has one (a tool without
    one has no server to watch), and that of a tool not registered yet (an MCP server that
    could not be listed).
    """

    ok: bool
    reason_code: str
    reason: str
    descriptor: ToolDescriptor | None = None
    descriptors: list[ToolDescriptor] | None = None
    digest: str | None = None
    states: dict[str, ToolState] | None = None
