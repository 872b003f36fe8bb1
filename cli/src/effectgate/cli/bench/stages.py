"""Where a governed call's time goes, from timestamps the system already records."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects

__all__ = ["STAGES", "CallTimes", "Stamp", "call_times", "handler_ms", "log_handler_ms", "read_stamps", "stage_medians"]


class _Event(msgspec.Struct):
    request_id: str
    occurred_at: datetime
    duration_ms: float | None = None


_event = msgspec.json.Decoder(_Event)


@dataclass(frozen=True)
class Stamp:
    """One event of one request: when it was made and when the stream stored it (seconds since the epoch)."""

    made: float
    stored: float
    duration_ms: float | None = None


@dataclass(frozen=True)
class CallTimes:
    """Every time known of one governed call (seconds since the epoch, durations in ms)."""

    started: float
    request: Stamp
    decision: Stamp
    receipt: Stamp
    received: float
    policy_handler_ms: float | None
    executor_handler_ms: float | None


STAGES: tuple[tuple[str, str], ...] = (
    ("call → request made", "SDK: descriptor lookup (tg.tools.get)"),
    ("request made → stored", "SDK: publish the request"),
    ("request stored → policy decides", "policy: pull, dispatch, decode"),
    ("policy decides → decision stored", "policy: checks, Redis, Cedar, sign, publish"),
    ("decision stored → receipt made", "executor: pull, verify, KV, claim, tool"),
    ("receipt made → stored", "executor: scrub, sign, publish"),
    ("receipt stored → client has it", "core delivery, signature check"),
    ("request → decision", "request made → decision stored"),
    ("decision → receipt", "decision stored → receipt stored"),
    ("receipt → client", "receipt stored → client has it"),
    ("whole call", "call → client has it"),
    ("policy handler", "its request line: delivered → acked"),
    ("executor handler", "its request line: delivered → acked"),
    ("tool ran", "the receipt's duration_ms"),
)
"""Each stage's name and what it holds, in report order."""


def _spans(call: CallTimes) -> dict[str, float | None]:
    """Each stage of :data:`STAGES` for one call, milliseconds (``None``: not recorded)."""
    points = [call.started, call.request.made, call.request.stored, call.decision.made]
    points += [call.decision.stored, call.receipt.made, call.receipt.stored, call.received]
    gaps = [(later - earlier) * 1000 for earlier, later in zip(points, points[1:], strict=False)]
    coarse = [
        (call.decision.stored - call.request.made) * 1000,
        (call.receipt.stored - call.decision.stored) * 1000,
        (call.received - call.receipt.stored) * 1000,
        (call.received - call.started) * 1000,
    ]
    recorded = [call.policy_handler_ms, call.executor_handler_ms, call.receipt.duration_ms]
    return dict(zip((name for name, _ in STAGES), [*gaps, *coarse, *recorded], strict=True))


def stage_medians(calls: Iterable[CallTimes]) -> dict[str, float | None]:
    """The median of each stage of :data:`STAGES` over ``calls``, milliseconds (``None``: none recorded)."""
    columns: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    for call in calls:
        for name, value in _spans(call).items():
            if value is not None:
                columns[name].append(value)
    return {name: statistics.median(values) if values else None for name, values in columns.items()}


def handler_ms(lines: Iterable[str], consumer: str) -> dict[str, float]:
    """``{request id: duration_ms}`` of the request lines of ``consumer`` (text ``key=value`` or JSON lines)."""
    found: dict[str, float] = {}
    for line in lines:
        fields = _fields(line)
        if fields.get("consumer") == consumer and "request_id" in fields and "duration_ms" in fields:
            found[str(fields["request_id"])] = float(str(fields["duration_ms"]))
    return found


def _fields(line: str) -> dict[str, object]:
    """The fields of one log line: a JSON object, or the ``key=value`` words of a text line."""
    if line.startswith("{"):
        try:
            parsed = json.loads(line)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {key: value for key, _, value in (part.partition("=") for part in line.split() if "=" in part)}


def log_handler_ms(logs: Path, service: str, consumer: str) -> dict[str, float]:
    """:func:`handler_ms` of ``<logs>/<service>.log`` (``{}`` when there is no such log)."""
    path = logs / f"{service}.log"
    return handler_ms(path.read_text(errors="replace").splitlines(), consumer) if path.exists() else {}


async def read_stamps(nc: Client, principal: str) -> dict[str, dict[str, Stamp]]:
    """``{"request"|"decision"|"receipt": {request id: Stamp}}`` of every event of ``principal`` in the stream."""
    filters = {
        "request": Subjects.request(principal),
        "decision": Subjects.decisions_of(principal),
        "receipt": Subjects.receipts_of(principal),
    }
    return {kind: await _stamps(nc, subject) for kind, subject in filters.items()}


async def _stamps(nc: Client, subject: str) -> dict[str, Stamp]:
    """Every event on ``subject`` (wildcards allowed), read by an ephemeral consumer from the start."""
    config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, filter_subject=subject)
    subscription = await nc.jetstream().pull_subscribe(subject, stream=catalog.STREAM, config=config)
    found: dict[str, Stamp] = {}
    try:
        while True:
            try:
                batch = await subscription.fetch(256, timeout=2.0)
            except nats.errors.TimeoutError:
                return found
            for msg in batch:
                event = _event.decode(msg.data)
                made, stored = event.occurred_at.timestamp(), msg.metadata.timestamp.timestamp()
                found[event.request_id] = Stamp(made, stored, event.duration_ms)
            if batch[-1].metadata.num_pending == 0:
                return found
    finally:
        await subscription.unsubscribe()


def call_times(
    started: Mapping[str, float],
    received: Mapping[str, float],
    stamps: Mapping[str, Mapping[str, Stamp]],
    handlers: tuple[Mapping[str, float], Mapping[str, float]],
) -> list[CallTimes]:
    """The :class:`CallTimes` of every request id in ``received`` whose three events were read back."""
    found = []
    for rid, had in received.items():
        if all(rid in stamps[kind] for kind in ("request", "decision", "receipt")):
            parts = (stamps["request"][rid], stamps["decision"][rid], stamps["receipt"][rid])
            found.append(CallTimes(started[rid], *parts, had, handlers[0].get(rid), handlers[1].get(rid)))
    return found
