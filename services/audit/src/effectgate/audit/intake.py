"""Turning one delivered stream message into the fields of an audit record.

Anything is recorded, even a body that is not an event (a malformed request is part
of the story): its type is then ``unparseable`` and the payload is kept verbatim
(non-UTF-8 bytes as backslash escapes).
"""

from __future__ import annotations

from typing import Any

import msgspec

from effectgate.audit.domain import AuditEntry
from effectgate.contracts.bus.catalog import principal_of_request
from effectgate.contracts.events import decode_untrusted, request_identity

__all__ = ["entry_of"]


class _Head(msgspec.Struct):
    type: Any = None
    request_id: Any = None
    principal: Any = None
    occurred_at: Any = None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_head = msgspec.json.Decoder(_Head)


def entry_of(subject: str, data: bytes, msg_id: str | None, stream_seq: int, received_at: str) -> AuditEntry:
    """The :class:`AuditEntry` of one delivered stream message.

    Args:
        subject: the message subject.
        data: the raw body.
        msg_id: the ``Nats-Msg-Id`` header.
        stream_seq: the message's stream sequence.
        received_at: ISO 8601 UTC time to use when the body carries none.
    """
    try:
        head = decode_untrusted(_head, data)
    except msgspec.DecodeError:
        head = _Head()
    requester = principal_of_request(subject)
    request_id = request_identity(data, msg_id, stream_seq) if requester else _text(head.request_id)
    return AuditEntry(
        stream_seq=stream_seq,
        subject=subject,
        event_type=_text(head.type) or "unparseable",
        request_id=request_id,
        principal=requester or _text(head.principal),
        occurred_at=_text(head.occurred_at) or received_at,
        payload=data.decode("utf-8", errors="backslashreplace"),
    )
