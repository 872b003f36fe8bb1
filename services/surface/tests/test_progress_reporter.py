"""One call's progress notifications: each above the last, the item count as the progress, at most one per gap,
the latest count once the gap ended, and nothing once closed."""

from __future__ import annotations

import asyncio

from effectgate.surface.progress import Reporter

GAP_S = 0.05


class _Sent(list[tuple[float, str]]):
    async def __call__(self, progress: float, message: str) -> None:
        self.append((progress, message))


async def test_items_are_the_progress_and_waits_stay_between_two_counts() -> None:
    sent = _Sent()
    reporter = Reporter(sent, hold_s=20.0, gap_s=0.0)
    await reporter.waited(5.0, "waiting")
    await reporter.waited(10.0, "waiting")
    await reporter.heard(1, "one")
    await reporter.heard(1, "the same count again")
    await reporter.waited(15.0, "waiting")
    await reporter.heard(3, "three")
    assert [message for _, message in sent] == ["waiting", "waiting", "one", "waiting", "three"]
    values = [progress for progress, _ in sent]
    assert values == sorted(set(values))  # each above the last
    assert (values[2], values[4]) == (1.0, 3.0)
    assert 0 < values[0] < values[1] < 1 < values[3] < 2


async def test_counts_heard_within_the_gap_go_out_once_as_the_latest_when_it_ends() -> None:
    sent = _Sent()
    reporter = Reporter(sent, hold_s=20.0, gap_s=GAP_S)
    for items in range(1, 6):
        await reporter.heard(items, f"{items} rows")
    assert sent == [(1.0, "1 rows")]
    await asyncio.sleep(GAP_S * 3)
    assert sent == [(1.0, "1 rows"), (5.0, "5 rows")]


async def test_nothing_goes_out_once_closed_not_even_a_count_waiting_for_its_gap() -> None:
    sent = _Sent()
    reporter = Reporter(sent, hold_s=20.0, gap_s=GAP_S)
    await reporter.heard(1, "1 rows")
    await reporter.heard(2, "2 rows")  # within the gap: waits for it
    await reporter.close()
    await reporter.heard(3, "3 rows")
    await reporter.waited(1.0, "waiting")
    await asyncio.sleep(GAP_S * 3)
    assert sent == [(1.0, "1 rows")]


async def test_a_client_that_cannot_be_sent_to_ends_the_reporting_quietly() -> None:
    calls: list[float] = []

    async def failing(progress: float, message: str) -> None:
        calls.append(progress)
        raise ConnectionError("gone")

    reporter = Reporter(failing, hold_s=20.0, gap_s=0.0)
    await reporter.heard(1, "1 rows")
    await reporter.heard(2, "2 rows")
    assert calls == [1.0]
