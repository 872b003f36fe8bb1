"""Reporting security events from any service, without ever slowing the path that saw them."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import SecurityEvent
from effectgate.contracts.security import SUBJECT_MAX_CHARS, SecurityKind, bounded, digest, safe_token, violation_of
from effectgate.shared.stores.stream import publish_event

__all__ = ["MAX_PER_WINDOW", "WINDOW_S", "Publish", "SecurityReporter"]

log = logging.getLogger("effectgate.security")

WINDOW_S = 60.0
"""Seconds within which identical reports count once, and :data:`MAX_PER_WINDOW` applies."""

MAX_PER_WINDOW = 100
"""Reports one reporter publishes per window at most."""

PUBLISH_TIMEOUT_S = 2.0
"""PubAck wait of one report, seconds."""

Publish = Callable[[str, SecurityEvent], Awaitable[object]]


class SecurityReporter:
    """Builds, bounds and publishes one service's security events.

    Args:
        service: the observing service (the ``<service>`` subject token).
        window_s: see :data:`WINDOW_S`.
        max_per_window: see :data:`MAX_PER_WINDOW`.
        clock: monotonic seconds (injected for tests).
    """

    def __init__(
        self,
        service: str,
        *,
        window_s: float = WINDOW_S,
        max_per_window: int = MAX_PER_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.service, self._window_s, self._max, self._clock = service, window_s, max_per_window, clock
        self._publish: Publish | None = None
        self._seen: set[tuple[Any, ...]] = set()
        self._window_start, self._suppressed = clock(), 0
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, js: JetStreamContext) -> None:
        """Publish from now on through ``js`` (JetStream, ``Nats-Msg-Id`` dedupe)."""

        async def publish(subject: str, event: SecurityEvent) -> object:
            return await publish_event(js, subject, event, timeout_s=PUBLISH_TIMEOUT_S)

        self.attach_publish(publish)

    def attach_publish(self, publish: Publish) -> None:
        """Publish from now on with ``publish(subject, event)``."""
        self._publish = publish

    def report(
        self,
        kind: SecurityKind,
        *,
        actor: str | None = None,
        principal: str | None = None,
        request_id: str | None = None,
        approval_id: str | None = None,
        subject: str | None = None,
        reason_code: str | None = None,
        detail: str = "",
        payload: bytes | None = None,
        payload_sha256: str | None = None,
    ) -> bool:
        """Log and (in the background) publish one security event; never raises.

        ``payload`` is recorded as its SHA-256 only; ``payload_sha256`` (``sha256:<64 hex>``) gives
        that digest directly for a payload too big to keep in memory (``payload`` wins when both are given).

        Returns:
            ``True`` when reported, ``False`` when suppressed (identical within the window,
            or over the window's cap).
        """
        fields: dict[str, Any] = {
            "actor": safe_token(actor),
            "principal": safe_token(principal),
            "request_id": safe_token(request_id),
            "approval_id": safe_token(approval_id),
            "subject": None if subject is None else bounded(subject, SUBJECT_MAX_CHARS),
            "reason_code": safe_token(reason_code),
            "detail": bounded(detail),
            "payload_sha256": payload_sha256 if payload is None else digest(payload),
        }
        if not self._admit((kind, *fields.values())):
            return False
        event = SecurityEvent(
            event_id=uuid.uuid4().hex, occurred_at=datetime.now(UTC), kind=kind, service=self.service, **fields
        )
        log.warning("security: %s seen by %s: %s", kind.value, self.service, _summary(event))
        self._send(event)
        return True

    async def flush(self) -> None:
        """Wait until every report in flight was published (or its failure logged)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    async def on_error(self, error: Exception) -> None:
        """A NATS ``error_cb``: a permissions violation on this connection is reported; never raises."""
        found = violation_of(error)
        if found is not None:
            operation, subject = found
            self.report(
                SecurityKind.PERMISSION_VIOLATION,
                actor=self.service,
                subject=subject,
                reason_code=f"{operation}_refused",
                detail=f"the NATS server refused {self.service}'s {operation} to {subject!r}",
            )

    def _admit(self, fingerprint: tuple[Any, ...]) -> bool:
        now = self._clock()
        if now - self._window_start >= self._window_s:
            if self._suppressed:
                log.warning(
                    "security: %d more reports by %s suppressed in the last window", self._suppressed, self.service
                )
            self._seen, self._window_start, self._suppressed = set(), now, 0
        if fingerprint in self._seen:
            return False
        if len(self._seen) >= self._max:
            self._suppressed += 1
            return False
        self._seen.add(fingerprint)
        return True

    def _send(self, event: SecurityEvent) -> None:
        if self._publish is None:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._publish_logged(self._publish, event))
        except RuntimeError:  # no running loop: the log line is the record
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish_logged(self, publish: Publish, event: SecurityEvent) -> None:
        subject = Subjects.security(self.service, event.kind.value)
        try:
            await publish(subject, event)
        except Exception as error:  # logged: a report never breaks the path that made it
            log.error("security: could not publish %s (%s): %s", subject, type(error).__name__, _summary(event))


def _summary(event: SecurityEvent) -> str:
    parts = ("actor", "principal", "request_id", "approval_id", "subject", "reason_code", "detail")
    shown = [f"{name}={getattr(event, name)!r}" for name in parts if getattr(event, name)]
    return ", ".join(shown) or "no detail"
