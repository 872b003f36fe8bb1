"""The CLI shows a replay as the stored outcome it carries, marked as a replay, and `call` exits as that outcome."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from rich.console import Console

from effectgate.cli.commands.call import _shown, exit_code
from effectgate.cli.render.views import receipt_row, receipts_table
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.vocabulary import Outcome

STORED = [
    (Outcome.FAILED, "tool_error", "Error: order not found", 5),
    (Outcome.DENIED, "approval_expired", "the approval expired before use", 3),
    (Outcome.REFUSED, "path_outside_sandbox", "'../x' is outside the sandbox", 4),
    (Outcome.UNCERTAIN, "tool_timeout", "no answer in 30s; reconcile it", 6),
    (Outcome.SUCCEEDED, "ok", "the tool ran", 0),
]


def _replay(stored: Outcome, code: str, reason: str) -> ReceiptIssued:
    return ReceiptIssued(
        event_id="receipt:p:r2",
        occurred_at=datetime.now(UTC),
        request_id="r2",
        principal="p",
        outcome=Outcome.REPLAYED,
        reason_code=code,
        reason=reason,
        tool="orders",
        operation="cancel",
        replay_of="r1",
        replay_outcome=stored,
    )


def _text(renderable: object) -> str:
    out = StringIO()
    Console(file=out, width=300, color_system=None).print(renderable)
    return out.getvalue()


@pytest.mark.parametrize(("stored", "code", "reason", "expected_exit"), STORED, ids=[s[0].value for s in STORED])
def test_call_shows_a_replay_as_its_stored_outcome_and_exits_as_it(
    stored: Outcome, code: str, reason: str, expected_exit: int
) -> None:
    replay = _replay(stored, code, reason)
    shown = _text(_shown(replay, "orders", "cancel"))
    assert f"replayed {stored.value}  orders.cancel" in shown and f"reason: {code}: {reason}" in shown
    assert "replay of request r1 under the same idempotency key: the tool did not run again" in shown
    assert exit_code(replay) == expected_exit


@pytest.mark.parametrize(("stored", "code", "reason", "expected_exit"), STORED, ids=[s[0].value for s in STORED])
def test_a_receipt_table_row_shows_a_replay_as_its_stored_outcome(
    stored: Outcome, code: str, reason: str, expected_exit: int
) -> None:
    table = receipts_table("calls")
    receipt_row(table, "2", "orders.cancel", _replay(stored, code, reason))
    shown = _text(table)
    assert f"replayed {stored.value}" in shown and f"{code}: {reason}" in shown
