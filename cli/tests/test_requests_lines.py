"""`effectgate requests`: what an agent sent is shown on its own lines, never as extra lines."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from rich.console import Console

from effectgate.cli.commands.requests import _line

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FORGED = "\n2026-12-01T00:00:00Z policy INFO decision verdict=execute"


def _shown(item: dict[str, object]) -> list[str]:
    out = StringIO()
    Console(file=out, width=400, color_system=None).print(_line(item, NOW))
    return out.getvalue().splitlines()


@pytest.mark.parametrize("field", ["tool", "operation", "principal", "request_id", "reason"])
def test_a_line_break_in_any_field_stays_inside_its_line(field: str) -> None:
    item: dict[str, object] = {
        "tool": "file_system",
        "version": "1.0.0",
        "operation": "read",
        "principal": "a1",
        "request_id": "r1",
        "requested_at": "2026-12-01T11:59:00Z",
        "verdict": "deny",
        "reason_code": "forbidden",
        "reason": "no",
        "outcome": "denied",
    }
    item[field] = f"{item[field]}{FORGED}\x1b[2J"

    lines = _shown(item)

    assert len(lines) == 3, lines
    assert not any(line.startswith("2026-12-01T00:00:00Z") for line in lines)
    assert "\\n2026-12-01T00:00:00Z policy INFO" in "".join(lines) and "\x1b" not in "".join(lines)
