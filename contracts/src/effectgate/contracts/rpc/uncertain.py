"""Bodies of the executor's operator requests about ``uncertain`` calls.

``tg.executor.uncertain.list`` takes a :class:`~effectgate.contracts.bus.paging.PageQuery` and
answers an :class:`UncertainPage`; ``tg.executor.uncertain.resolve`` takes a
:class:`ResolveCommand` signed by the operator key and answers a :class:`ResolveAnswer`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Generic, Literal, TypeVar

import msgspec

from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.events import Resolution

__all__ = ["MAX_NOTE_CHARS", "ResolveAnswer", "ResolveCommand", "UncertainCall", "UncertainPage"]

MAX_NOTE_CHARS = 500
"""Longest operator's note, characters."""

Item = TypeVar("Item")
_Token = Annotated[str, msgspec.Meta(pattern=TOKEN.pattern)]


class UncertainCall(msgspec.Struct, frozen=True, kw_only=True):
    """One ``uncertain`` call and the latest resolution of it.

    Attributes:
        request_id / principal / tool / version / operation: the call's.
        uncertain_at: when its ``uncertain`` receipt was issued, UTC.
        reason_code: the receipt's (``timeout``, ``execution_interrupted``, …).
        resolution: ``ran``, ``not_run``, ``unknown``; ``None`` while nothing resolved it
            (a ``ran``/``not_run`` is preferred over a later ``unknown``).
        resolved_by: ``reconciler`` or ``operator``, with ``resolution``.
        resolution_id: the resolution's ``event_id``.
        note: the resolution's note.
    """

    request_id: str
    principal: str
    uncertain_at: datetime
    reason_code: str
    tool: str | None = None
    version: str | None = None
    operation: str | None = None
    resolution: Resolution | None = None
    resolved_by: str | None = None
    resolution_id: str | None = None
    note: str = ""


class UncertainPage(msgspec.Struct, Generic[Item], frozen=True, kw_only=True):
    """Answer of ``tg.executor.uncertain.list``, read as ``UncertainPage[UncertainCall]``.

    Attributes:
        ok: the page was read; else ``reason_code`` is ``malformed``, ``oversized`` or ``stream_unavailable``.
        calls: ``uncertain`` calls, oldest receipt first.
        next: the cursor of the next page (``after``), ``None`` on the last page.
    """

    ok: bool
    reason_code: str
    reason: str
    calls: list[Item] = msgspec.field(default_factory=list)
    next: str | None = None


class ResolveCommand(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Body of ``tg.executor.uncertain.resolve``: the operator says what became of one ``uncertain`` call.

    Attributes:
        request_id / principal: the call.
        resolution: ``ran`` or ``not_run``.
        note: why, for the record (at most :data:`MAX_NOTE_CHARS`).
        signature: base64 Ed25519 signature by the operator key over the canonical JSON of
            the other fields (:func:`effectgate.contracts.integrity.signing.sign_event`).
    """

    request_id: _Token
    principal: _Token
    resolution: Literal["ran", "not_run"]
    note: Annotated[str, msgspec.Meta(max_length=MAX_NOTE_CHARS)] = ""
    signature: str = ""


class ResolveAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """Answer of ``tg.executor.uncertain.resolve``.

    Attributes:
        ok: the resolution was published.
        reason_code: ``resolved``, or ``malformed``, ``not_operator`` (not signed by the
            operator key), ``not_uncertain`` (the request has no ``uncertain`` receipt),
            ``already_resolved`` (it was resolved ``ran``/``not_run`` before), ``stream_unavailable``.
        reason: human text.
        resolution_id: the published resolution's ``event_id``.
    """

    ok: bool
    reason_code: str
    reason: str
    resolution_id: str | None = None
