"""``effectgate audit verify`` names the records missing at the start of the chain."""

from __future__ import annotations

from effectgate.cli.render.audit_report import problems


def test_records_missing_before_the_chain_s_first_are_a_problem_naming_their_stream_sequences() -> None:
    reply = {"result": {"ok": True}, "missing_at_start": {"first": 1, "last": 2}}
    [line] = problems(reply)
    assert "missing at the start of the chain" in line and "stream sequences 1 to 2" in line
    assert problems({"result": {"ok": True}, "missing_at_start": None}) == []
