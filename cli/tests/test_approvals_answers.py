"""``approvals approve/reject``: an approval not open yet is answered again until it opens or the wait ends."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.cli.client import rpc

NOT_OPEN = {"ok": False, "reason_code": "approval_not_open", "reason": "ap-0123456789ab is not open yet"}
VOTED = {"ok": True, "reason_code": "voted", "reason": "vote 1 of 2 recorded on ap-0123456789ab"}
REFUSED = {"ok": False, "reason_code": "not_entitled", "reason": "alice lacks the role 'sre'"}


class Answers:
    """A bus whose approvals service gives ``answers`` in turn (the last one again and again)."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers, self.asked = list(answers), 0

    async def request(self, subject: str, body: Any, timeout_s: float = 5.0) -> dict[str, Any]:
        self.asked += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@pytest.mark.parametrize(
    ("answers", "wait_s", "final", "asked"),
    [
        ((NOT_OPEN, NOT_OPEN, VOTED), 10.0, "voted", 3),
        ((VOTED,), 10.0, "voted", 1),
        ((REFUSED,), 10.0, "not_entitled", 1),  # a refusal is never answered again
        ((NOT_OPEN, REFUSED), 10.0, "not_entitled", 2),
        ((NOT_OPEN,), 0.0, "approval_not_open", 1),  # no wait: told at once
    ],
)
async def test_an_answer_is_repeated_only_while_the_approval_is_not_open(
    answers: tuple[dict[str, Any], ...], wait_s: float, final: str, asked: int
) -> None:
    bus = Answers(*answers)
    answer = await rpc.decide_when_open(bus, "alice", "ap-0123456789ab", True, wait_s=wait_s)  # type: ignore[arg-type]
    assert (answer["reason_code"], bus.asked) == (final, asked)


async def test_the_wait_is_bounded_and_ends_not_open() -> None:
    bus = Answers(NOT_OPEN)
    answer = await rpc.decide_when_open(bus, "alice", "ap-0123456789ab", True, wait_s=0.5)  # type: ignore[arg-type]
    assert answer["reason_code"] == "approval_not_open" and 2 <= bus.asked <= 4
