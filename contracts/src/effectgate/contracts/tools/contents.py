"""What a call's file references named when an approval opened, and how that is compared and shown (pure).

An approval binds the hash of the canonical request (its arguments: the *references*). For each
declared file reference (:mod:`effectgate.contracts.tools.file_references`) the executor also
reads what the reference names, as a :class:`ContentState`: a regular file's SHA-256 and size,
or that nothing is there.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final

import msgspec

__all__ = [
    "CARD_LINES",
    "MAX_REFERENCES",
    "ContentKind",
    "ContentState",
    "content_line",
    "content_lines",
    "first_change",
]

MAX_REFERENCES: Final = 256
"""References of one call whose content is read; the rest bind the reference only."""

CARD_LINES: Final = 12
"""Lines :func:`content_lines` gives at most (the rest are summed up in one more line)."""


class ContentKind(StrEnum):
    """What a file reference named when it was read."""

    FILE = "file"
    """A regular file: its SHA-256 and size are bound."""
    ABSENT = "absent"
    """Nothing there: bound as absent (a file that appears is a change)."""
    DIRECTORY = "directory"
    """A directory: its entries are not read; the reference only is bound."""
    OTHER = "other"
    """Not readable as a file (``note`` says why): the reference only is bound."""
    UNSEEN = "unseen"
    """The executor cannot see the tool's files: the reference only is bound."""


class ContentState(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one file reference named when the executor read it.

    Attributes:
        pointer: JSON Pointer of the reference in the arguments (``/path``, ``/files/0``).
        path: the reference as given (``""`` when the value is not a string).
        kind: what was found.
        sha256: ``sha256:<hex>`` of the file's bytes (``file`` only).
        size_bytes: the file's size in bytes (``file``, and ``other`` when it was too large).
        note: why only the reference is bound (``other``, ``unseen``), e.g. ``a symlink``.
    """

    pointer: str
    path: str
    kind: ContentKind
    sha256: str | None = None
    size_bytes: int | None = None
    note: str = ""

    @property
    def bound(self) -> bool:
        """Whether the content (or its absence) is bound, not the reference only."""
        return self.kind in (ContentKind.FILE, ContentKind.ABSENT)


def first_change(bound: Sequence[ContentState], now: Sequence[ContentState]) -> str | None:
    """Why what the references name ``now`` is not what the approval ``bound``, naming the path; ``None`` if equal.

    A reference read now that the approval holds nothing for (an approval opened without
    reading them) is a change too: what the approver saw of it is unknown.
    """
    before = {state.pointer: state for state in bound}
    for state in now:
        was = before.pop(state.pointer, None)
        if was is None:
            return f"{_name(state)}: the approval binds nothing of what it names"
        if was != state:
            return f"{_name(state)} {_change(was, state)} since the approval was opened"
    gone = next(iter(before.values()), None)
    return None if gone is None else f"{_name(gone)}: the call no longer names it"


def _name(state: ContentState) -> str:
    shown = state.path if len(state.path) <= 120 else state.path[:119] + "…"
    return repr(shown) if state.path else state.pointer


def _change(was: ContentState, now: ContentState) -> str:
    if was.kind is ContentKind.FILE and now.kind is ContentKind.FILE:
        return f"changed ({_what(was)} → {_what(now)})"
    if was.kind is ContentKind.ABSENT:
        return f"did not exist and now is {_what(now)}"
    if now.kind is ContentKind.ABSENT:
        return f"was {_what(was)} and is gone"
    return f"was {_what(was)} and is now {_what(now)}"


def _what(state: ContentState) -> str:
    if state.kind is ContentKind.FILE:
        return f"a file of {state.size_bytes} bytes, {(state.sha256 or '').removeprefix('sha256:')[:12]}"
    if state.kind is ContentKind.ABSENT:
        return "absent"
    if state.kind is ContentKind.DIRECTORY:
        return "a directory"
    return state.note or str(state.kind)


def content_line(state: ContentState) -> str:
    """One line for people: what the reference named and whether its content is bound.

    E.g. ``'notes.txt': a file of 12 bytes, sha256 1a2b3c4d5e6f — bound``,
    ``'new.txt': absent — bound (the call is refused if it appears)``,
    ``'src': a directory — binds the reference only``.
    """
    if state.kind is ContentKind.FILE:
        return f"{_name(state)}: {_what(state).replace(', ', ', sha256 ')} — bound"
    if state.kind is ContentKind.ABSENT:
        return f"{_name(state)}: absent — bound (the call is refused if it appears)"
    return f"{_name(state)}: {_what(state)} — binds the reference only"


def content_lines(states: Sequence[ContentState]) -> tuple[str, ...]:
    """At most :data:`CARD_LINES` lines of :func:`content_line`, then one summing up the rest."""
    lines = [content_line(state) for state in states[:CARD_LINES]]
    rest = states[CARD_LINES:]
    if rest:
        bound = sum(state.bound for state in rest)
        lines.append(f"… and {len(rest)} more references ({bound} bound, {len(rest) - bound} the reference only)")
    return tuple(lines)
