"""The registry's record of each tool's state as the executor announces it (:mod:`~effectgate.contracts.tools`).

Announcements arrive on ``tg.tool.state.<tool>`` (core NATS, the same messages the stream
keeps); at start-up the registry first reads the last one kept for each tool, so a change
announced while it was down is not lost. An announcement whose body does not name the tool
of its subject, or that is older than the state recorded, is not recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import ToolStateChanged, decode_untrusted
from effectgate.shared.stores.tools_kv import ToolsBucket

__all__ = ["StateRecorder"]

log = logging.getLogger("effectgate.registry")

_decoder = msgspec.json.Decoder(ToolStateChanged)
_PREFIX = Subjects.TOOL_STATES.removesuffix("*")


class StateRecorder:
    """Records announced tool states in the tools bucket (``state.<tool>``).

    Args:
        bucket: the tools bucket.
        on_ready: called with the tool's name when a recorded announcement says ``ready``.
    """

    def __init__(self, bucket: ToolsBucket, on_ready: Callable[[str], None] | None = None) -> None:
        self._bucket, self._on_ready = bucket, on_ready

    async def catch_up(self, js: JetStreamContext) -> int:
        """Record the last announcement kept in the stream for each tool; return how many were read.

        Raises:
            nats.errors.TimeoutError, nats.js.errors.APIError: the stream could not be read.
        """
        info = await js.stream_info(catalog.STREAM, subjects_filter=Subjects.TOOL_STATES)
        subjects = sorted(info.state.subjects or {})
        for subject in subjects:
            message = await js.get_last_msg(catalog.STREAM, subject)
            await self.record(subject, message.data or b"")
        return len(subjects)

    async def record(self, subject: str, data: bytes) -> bool:
        """Record one announcement; return whether it was recorded (see the module doc)."""
        try:
            event = decode_untrusted(_decoder, data)
        except msgspec.DecodeError as error:
            log.warning("%s: not a tool state: %s", subject, error)
            return False
        if subject != _PREFIX + event.tool:
            log.warning("%s: announces the state of another tool (%s): not recorded", subject, event.tool)
            return False
        known = await self._bucket.state(event.tool)
        if known is not None and known.since > event.state.since:
            return False
        await self._bucket.put_state(event.tool, event.state)
        since = event.state.since.isoformat(timespec="seconds")
        log.info("tool %s: %s since %s %s", event.tool, event.state.state, since, event.state.reason)
        if self._on_ready is not None and event.state.state == "ready":
            self._on_ready(event.tool)
        return True
