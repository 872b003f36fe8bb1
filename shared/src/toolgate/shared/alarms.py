"""Alarms: what the audit announces for each security event it records, and how to list them.

When the audit chains a :class:`~toolgate.contracts.events.SecurityEvent` it publishes an
:class:`Alarm` on the core subject ``tg.alarm.<kind>`` (not stored: whoever watches
gets it now; the chain keeps the event). ``tg.audit.alarms`` (:class:`AlarmsQuery`,
:class:`AlarmsReply`) lists the most recent ones from the audit's database. Approvers
and operators may do both; agents may do neither (``contracts/nats_permissions.py``).
"""

from __future__ import annotations

import msgspec

from toolgate.contracts.events import SecurityEvent

__all__ = ["MAX_ALARMS", "Alarm", "AlarmsQuery", "AlarmsReply"]

MAX_ALARMS = 500
"""Most alarms one ``tg.audit.alarms`` answer lists."""


class Alarm(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded security event, as announced and as listed.

    Attributes:
        sequence: its position in the audit chain.
        stream_seq: its stream sequence.
        service: the reporting service, from its subject ``tg.security.<service>.<kind>``
            (NATS permissions vouch for that token, not for the body's ``service``).
        event: the event as recorded.
    """

    sequence: int
    stream_seq: int
    service: str
    event: SecurityEvent


class AlarmsQuery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.audit.alarms``: the ``limit`` most recent security events (1 to :data:`MAX_ALARMS`)."""

    limit: int = 50


class AlarmsReply(msgspec.Struct, frozen=True, kw_only=True):
    """The most recent security events, oldest first; ``ok=False`` names what was wrong with the query."""

    ok: bool
    reason: str
    alarms: list[Alarm] = []
