"""The annotation table of docs/how-to/configure-mcp-servers.md is what the code does, for every hint combination."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from effectgate.shared.mcp.hints import admitted, classify

BLOCK = re.compile(r"<!-- annotation-mapping:start -->\n(.*?)\n<!-- annotation-mapping:end -->", re.S)
HINTS = ("readOnlyHint", "destructiveHint", "openWorldHint")
WORDS = {"—": None, "true": True, "false": False}


def _rows(repo_root: Path) -> dict[tuple[bool | None, ...], tuple[str, str]]:
    shown = BLOCK.search((repo_root / "docs" / "how-to" / "configure-mcp-servers.md").read_text(encoding="utf-8"))
    assert shown is not None, "docs/how-to/configure-mcp-servers.md lost its annotation mapping table"
    rows = {}
    for line in shown[1].splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[tuple(WORDS[cell] for cell in cells[:3])] = (cells[3], cells[4])
    return rows


def _code(hints: tuple[bool | None, ...]) -> tuple[str, str]:
    annotations = {name: value for name, value in zip(HINTS, hints, strict=True) if value is not None}
    trusted, floor = classify(annotations), admitted(annotations)
    return f"{trusted[0].value} / {trusted[1].value}", f"{floor[0].value} / {floor[1].value}"


def test_the_table_covers_every_combination_once(repo_root: Path) -> None:
    assert sorted(_rows(repo_root), key=repr) == sorted(itertools.product(WORDS.values(), repeat=3), key=repr)


def test_each_row_is_what_the_mapping_gives(repo_root: Path) -> None:
    wrong = {hints: (shown, _code(hints)) for hints, shown in _rows(repo_root).items() if shown != _code(hints)}

    assert wrong == {}, "documented row (trusted, untrusted) vs the code"
