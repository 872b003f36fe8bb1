"""Turning one delivered stream message into the fields of an audit record.

Anything is recorded, even a body that is not an event (a malformed request is part
of the story): its type is then ``unparseable`` and the payload is kept verbatim
(non-UTF-8 bytes as backslash escapes).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["record_fields"]


class _Head(msgspec.Struct):
    type: str = "unparseable"
    request_id: str | None = None
    principal: str | None = None
    occurred_at: str | None = None


_head = msgspec.json.Decoder(_Head)


def _principal_of(subject: str) -> str | None:
    parts = subject.split(".")
    if parts[:2] == ["tg", "req"] and len(parts) == 3:
        return parts[2]
    return None


def record_fields(subject: str, data: bytes, msg_id: str | None, received_at: str) -> dict[str, Any]:
    """Return ``subject``, ``event_type``, ``request_id``, ``principal``, ``occurred_at``, ``payload``.

    Args:
        subject: the message subject.
        data: the raw body.
        msg_id: the ``Nats-Msg-Id`` header, the request id of an unparseable request.
        received_at: ISO 8601 UTC time to use when the body carries none.
    """
    try:
        head = _head.decode(data)
    except msgspec.DecodeError:
        head = _Head(request_id=msg_id)
    principal = _principal_of(subject) or head.principal
    return {
        "subject": subject,
        "event_type": head.type,
        "request_id": head.request_id,
        "principal": principal,
        "occurred_at": head.occurred_at or received_at,
        "payload": data.decode("utf-8", errors="backslashreplace"),
    }
