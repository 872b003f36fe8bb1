"""Answers of ``tg.tools.list.<principal>`` and ``tg.tools.get.<principal>``: the tools a caller may call.

The principal is the subject's last token (the transport's word; NATS permissions let
agent ``<p>`` ask only as ``<p>``). Each tool is shown with the operations the current
policy lets that principal call (:mod:`toolgate.policy.visibility`); a tool it may not
call at all is absent from the listing, and looking it up gets the reply of a tool that
does not exist, code and text alike.
"""

from __future__ import annotations

import msgspec

from toolgate.contracts.catalog import TOKEN
from toolgate.contracts.descriptors import SEMVER, TOOL_NAME, ToolDescriptor
from toolgate.contracts.events import decode_untrusted
from toolgate.contracts.listing import ToolsQuery, ToolsReply
from toolgate.policy.domain import PolicyPorts
from toolgate.policy.visibility import unknown_tool, visible

__all__ = ["get_for", "list_for", "principal_of"]

_query = msgspec.json.Decoder(ToolsQuery)
_UNREADABLE = ToolsReply(ok=False, reason_code="registry_unavailable", reason="the registry cannot be read")


def principal_of(subject: str) -> str:
    """The principal of ``tg.tools.{list,get}.<principal>``: the last token."""
    return subject.rsplit(".", 1)[-1]


def _visible(principal: str, descriptor: ToolDescriptor | None, ports: PolicyPorts) -> ToolDescriptor | None:
    engine = ports.policy.engine
    if descriptor is None or engine is None or not TOKEN.match(principal):
        return None
    return visible(engine, principal, descriptor)


async def list_for(principal: str, ports: PolicyPorts) -> ToolsReply:
    """The latest version of each tool ``principal`` may call, with its callable operations only.

    Never raises: a registry that cannot be read answers ``registry_unavailable``.
    """
    try:
        stored = await ports.descriptors.list()
    except Exception:  # any registry fault: no listing (the reply says so)
        return _UNREADABLE
    shown = [d for d in (_visible(principal, s, ports) for s in stored) if d is not None]
    return ToolsReply(ok=True, reason_code="found", reason=f"{len(shown)} tools", descriptors=shown)


async def get_for(principal: str, body: bytes, ports: PolicyPorts) -> ToolsReply:
    """One tool (``{"tool": …, "version": … | null}``) as ``principal`` sees it.

    Never raises: a body that is not a lookup answers ``malformed``, a name or version that
    cannot exist ``invalid_tool`` / ``invalid_version``, and a tool that is missing or
    hidden ``unknown_tool`` with the same text.
    """
    try:
        query = decode_untrusted(_query, body)
    except msgspec.DecodeError as error:
        return ToolsReply(ok=False, reason_code="malformed", reason=f"not a lookup: {error}")
    if not TOOL_NAME.match(query.tool):
        return ToolsReply(ok=False, reason_code="invalid_tool", reason=f"tool must match {TOOL_NAME.pattern}")
    if query.version is not None and not SEMVER.match(query.version):
        return ToolsReply(ok=False, reason_code="invalid_version", reason="version must be a semantic version")
    try:
        stored = await ports.descriptors.get(query.tool, query.version)
    except Exception:  # any registry fault: no answer about the tool
        return _UNREADABLE
    if (shown := _visible(principal, stored, ports)) is None:
        code, reason = unknown_tool(query.tool, query.version)
        return ToolsReply(ok=False, reason_code=code, reason=reason)
    return ToolsReply(ok=True, reason_code="found", reason="found", descriptor=shown)
