"""A server's stderr: each line a record, and its last words kept only once scrubbed whole."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator

import pytest

from effectgate.shared.mcp import stderr
from effectgate.shared.mcp.stderr import last_words, scrub_with, stderr_logged
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.redaction import Redactor

SECRET = "AnotherSecretToken_abcdefghijklmnopqrstuvwxyz0123"


@pytest.fixture
def scrubbing() -> Iterator[None]:
    scrub_with(Redactor(find_secrets, [SECRET]).text)
    try:
        yield
    finally:
        scrub_with(str)


async def _tail_of(text: str) -> str:
    tail = [""]
    async with stderr_logged("leaky", tail, logging.getLogger("test.stderr")) as (errlog, thread):
        code = f"import sys; sys.stderr.write({text!r})"
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stderr=errlog)
        assert await process.wait() == 0
    thread.join(5.0)
    return tail[0]


@pytest.mark.usefixtures("scrubbing")
@pytest.mark.parametrize(
    "line",
    [
        "a" * 5 + SECRET + "b" * 270,  # one token: clipped first, its tail would pass
        "x" * 290 + " " + SECRET,  # the secret at the very end
        SECRET + " " + "c" * 280,  # the secret's end is where the cut falls
    ],
)
async def test_no_part_of_a_configured_secret_survives_in_the_last_words(line: str) -> None:
    kept = await _tail_of(line + "\n")

    assert SECRET[-12:] not in kept and SECRET[:12] not in kept
    assert len(kept) <= stderr.LAST_WORDS_CHARS


def test_last_words_cut_at_a_word_and_marked() -> None:
    assert last_words("short line ") == "short line"
    assert last_words("word " * 100).startswith("…word") and len(last_words("word " * 100)) <= 300
