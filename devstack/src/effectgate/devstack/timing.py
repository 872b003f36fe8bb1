"""Wall-clock limits of tests that wait on processes they started, scaled for a loaded machine.

A test that waits for a spawned server, service or command to answer gives it a limit; on a
machine busy with other work (parallel test workers, CI neighbours) the same wait takes
longer. Such tests are marked ``timing`` and take their limits from :func:`scaled`, which
multiplies them by ``EFFECTGATE_TEST_TIME_FACTOR`` (default 1; below 1 is read as 1, so a
limit never shrinks). A limit is an upper bound: a passing wait ends as soon as its
condition holds, so a larger factor costs time only when something is wrong.
"""

from __future__ import annotations

import os

__all__ = ["TIME_FACTOR", "scaled"]

TIME_FACTOR = "EFFECTGATE_TEST_TIME_FACTOR"
"""The environment variable that multiplies every :func:`scaled` limit."""


def scaled(seconds: float) -> float:
    """``seconds`` times ``EFFECTGATE_TEST_TIME_FACTOR`` (at least 1).

    Raises:
        ValueError: the variable is set to something that is not a number.
    """
    raw = os.environ.get(TIME_FACTOR, "").strip()
    try:
        factor = float(raw) if raw else 1.0
    except ValueError:
        raise ValueError(f"{TIME_FACTOR} must be a number, not {raw!r}") from None
    return seconds * max(factor, 1.0)
