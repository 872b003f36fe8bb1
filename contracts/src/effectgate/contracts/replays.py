"""How a replayed receipt reads: the stored outcome it carries, and that it is a replay.

A request under an idempotency key that completed before ends ``replayed``: the tool did not
run again. Its receipt carries the stored receipt's outcome in ``replay_outcome`` and that
receipt's ``reason_code``, ``reason``, ``result`` (or ``result_ref``), ``effect_id`` and
``redactions`` whole; ``replay_of`` names the request that ran. A replay of an ``uncertain``
receipt also carries what became of the call since, when it was resolved (``resolution``,
``resolution_id``: the latest :class:`~effectgate.contracts.events.UncertainResolved`, a ``ran``
or ``not_run`` preferred over an ``unknown``).
"""

from __future__ import annotations

from effectgate.contracts.events import ReceiptIssued, Resolution
from effectgate.contracts.vocabulary import Outcome

__all__ = [
    "REPLAY_NOTE",
    "RESOLUTION_NOTES",
    "ended_as",
    "outcome_label",
    "replay_note",
    "resolution_note",
    "resolved_as",
]

REPLAY_NOTE = "replay of request {replay_of} under the same idempotency key: the tool did not run again"
"""What a replay adds to the stored outcome it shows."""

RESOLUTION_NOTES = {
    "ran": "resolved since: the effect happened (resolution {resolution_id})",
    "not_run": "resolved since: the effect did not happen (resolution {resolution_id})",
    "unknown": "not resolved: whether the effect happened is still unknown and left to an operator",
}
"""What a replayed ``uncertain`` receipt adds about its resolution, by its ``resolution``."""

_SUCCESS_CODES = frozenset({"ok", "output_withheld"})


def ended_as(receipt: ReceiptIssued) -> Outcome:
    """How the call ended: a replay's stored outcome (``replay_outcome``), else the receipt's ``outcome``.

    A ``replayed`` receipt that does not name it (an executor from before ``replay_outcome``)
    ended as a success when its reason code is a success's (``ok``, ``output_withheld``);
    otherwise how it ended is not said, and it stays ``replayed``.
    """
    if receipt.outcome is not Outcome.REPLAYED:
        return receipt.outcome
    if receipt.replay_outcome is not None:
        return receipt.replay_outcome
    return Outcome.SUCCEEDED if receipt.reason_code in _SUCCESS_CODES else Outcome.REPLAYED


def outcome_label(receipt: ReceiptIssued) -> str:
    """``failed`` for a receipt, ``replayed failed`` for a replay of a stored failure (and so on)."""
    ended = ended_as(receipt)
    if receipt.outcome is not Outcome.REPLAYED or ended is Outcome.REPLAYED:
        return receipt.outcome.value
    return f"{Outcome.REPLAYED.value} {ended.value}"


def replay_note(receipt: ReceiptIssued) -> str | None:
    """The sentence that says a receipt is a replay (:data:`REPLAY_NOTE`), or ``None`` for any other receipt."""
    if receipt.outcome is not Outcome.REPLAYED:
        return None
    return REPLAY_NOTE.format(replay_of=receipt.replay_of or "?")


def resolution_note(receipt: ReceiptIssued) -> str | None:
    """What became of a replayed ``uncertain`` call (:data:`RESOLUTION_NOTES`), or ``None`` when unresolved."""
    if receipt.resolution is None:
        return None
    return RESOLUTION_NOTES[receipt.resolution].format(resolution_id=receipt.resolution_id or "?")


def resolved_as(receipt: ReceiptIssued) -> Resolution | None:
    """What became of an ``uncertain`` call a replay shows: ``ran``, ``not_run``, ``unknown``; ``None`` when unresolved.

    ``None`` also for a receipt that is not of an ``uncertain`` call (only such a replay carries a resolution).
    """
    return receipt.resolution if ended_as(receipt) is Outcome.UNCERTAIN else None
