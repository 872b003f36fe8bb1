"""Tables that stay readable at any width: a table when every word fits its column, else one block per row."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "FittedTable", "short_digest"]

_SEPARATORS = re.compile(r"[\s│┃║┆┊|]+")
"""What stands between words on a rendered line: spaces and the table's vertical rules."""

DIGEST_SHOWN = 12
"""Hex digits of a digest shown in text (``sha256:3f2a1b2c4d5e…``); ``--json`` has them all."""


def short_digest(value: str) -> str:
    """``sha256:<64 hex>`` as ``sha256:<first 12>…``; a shorter value as it is."""
    algorithm, _, digits = value.rpartition(":")
    if len(digits) <= DIGEST_SHOWN + 1:
        return value
    return f"{algorithm}:{digits[:DIGEST_SHOWN]}…" if algorithm else f"{digits[:DIGEST_SHOWN]}…"


@dataclass(frozen=True)
class Column:
    """One column.

    Attributes:
        name: its header, and the label of its line in a block.
        head: on the block's first line (short values: ids, kinds, times); else a labelled line.
        label: whether its block line starts with ``<name>:``.
    """

    name: str
    head: bool = True
    label: bool = True


class FittedTable:
    """Rows of cells printed as a table, or as blocks when the table cannot fit (see the module's doc).

    Args:
        title: the table's title (also printed above the blocks).
        columns: the columns, in order.
        show_lines: lines between the table's rows.
        blocks: another block layout for narrow terminals (``rows -> renderable``), e.g. grouped rows.
    """

    def __init__(
        self,
        title: str | Text,
        columns: Sequence[Column],
        *,
        show_lines: bool = False,
        blocks: Callable[[list[list[Text]]], RenderableType] | None = None,
    ) -> None:
        self.title, self.columns, self.show_lines, self._blocks = title, list(columns), show_lines, blocks
        self.rows: list[list[Text]] = []

    def add_row(self, *cells: Text) -> None:
        """One row, a cell per column (inert :class:`Text`: the renderers make agent text safe first)."""
        self.rows.append(list(cells))

    def table(self) -> Table:
        """The rows as a Rich table (words wrap between words, a longer word folds)."""
        table = Table(title=self.title or None, show_lines=self.show_lines)
        for column in self.columns:
            table.add_column(column.name, overflow="fold")
        for row in self.rows:
            table.add_row(*row)
        return table

    def blocks(self) -> RenderableType:
        """The rows as blocks: head cells on one line, each other cell indented on its own."""
        if self._blocks is not None:
            return self._blocks(self.rows)
        title = [Text(self.title, style="italic") if isinstance(self.title, str) else self.title] if self.title else []
        return Group(*title, *(self._block(row) for row in self.rows))

    def _block(self, row: list[Text]) -> RenderableType:
        head = Text("  ").join(cell for column, cell in zip(self.columns, row, strict=True) if column.head and cell)
        rest: list[RenderableType] = []
        for column, cell in zip(self.columns, row, strict=True):
            if not column.head and cell:
                rest.append(Text.assemble((f"{column.name}: ", "dim"), cell) if column.label else cell)
        return Group(head, Padding(Group(*rest), (0, 0, 0, 4))) if rest else head

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table()
        yield table if self._whole_in(table, console, options) else self.blocks()

    def _whole_in(self, table: Table, console: Console, options: ConsoleOptions) -> bool:
        """Whether every word of the headers and cells stands whole on a line of ``table`` as laid out."""
        lines = console.render_lines(table, options, pad=False)
        shown = {word for line in lines for word in _SEPARATORS.split("".join(segment.text for segment in line))}
        words = {word for column in self.columns for word in column.name.split()}
        words |= {word for row in self.rows for cell in row for word in cell.plain.split()}
        return all(word in shown for word in words if len(word) < options.max_width)
