"""The audit trail (``audit trail``, the demo) lists records by chain sequence and shows times as UTC times."""

from __future__ import annotations

import re
from io import StringIO

from rich.console import Console

from effectgate.cli.demo.script import mtime_line
from effectgate.cli.render.views import trail_table, utc_time


def _render(table: object) -> str:
    out = StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def _record(sequence: int, stream_seq: int, occurred_at: str) -> dict[str, object]:
    return {
        "sequence": sequence,
        "stream_seq": stream_seq,
        "occurred_at": occurred_at,
        "event_type": f"event-{sequence}",
        "subject": "tg.req.a",
        "payload": "{}",
        "hash": "sha256:" + "c" * 64,
    }


def test_rows_follow_the_chain_sequence_whatever_order_they_arrive_in() -> None:
    records = [_record(9, 40, "2026-01-15T09:30:02Z"), _record(3, 41, "2026-01-15T09:30:00Z"), _record(5, 39, "x")]
    shown = _render(trail_table("r1", records))
    numbers = [int(m) for m in re.findall(r"^│ (\d+) ", shown, re.M)]
    assert numbers == [3, 5, 9]
    assert shown.index("event-3") < shown.index("event-5") < shown.index("event-9")


def test_the_trail_shows_when_each_event_occurred_in_utc() -> None:
    shown = _render(trail_table("r1", [_record(1, 1, "2026-01-15T10:30:00.125000+01:00")]))
    assert "when (UTC)" in shown and "2026-01-15T09:30:00.125Z" in shown


def test_times_are_iso_8601_utc_to_the_millisecond() -> None:
    assert utc_time("2026-01-15T09:30:00.125999Z") == "2026-01-15T09:30:00.125Z"
    assert utc_time(1768469400.5) == "2026-01-15T09:30:00.500Z"
    assert utc_time("not a time") == "not a time" and utc_time(None) == ""


def test_the_demos_replay_check_shows_times_not_epoch_numbers() -> None:
    same = mtime_line(1768469400_123456789, 1768469400_123456789)
    assert "2026-01-15T09:30:00.123Z" in same and "unchanged" in same
    assert "1768469400" not in same
    assert "CHANGED" in mtime_line(1768469400_123456789, 1768469400_123456790)
