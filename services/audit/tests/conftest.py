"""What the audit's tests share: a minimal record of one stream message."""

from __future__ import annotations

from effectgate.audit.domain import AuditEntry


def entry(stream_seq: int) -> AuditEntry:
    """An agent's ``tool.requested`` at ``stream_seq`` (request ``r<seq>``, principal ``a``)."""
    return AuditEntry(
        stream_seq=stream_seq,
        subject="tg.req.a",
        event_type="tool.requested",
        request_id=f"r{stream_seq}",
        principal="a",
        occurred_at="2026-01-01T00:00:00Z",
        payload="{}",
    )
