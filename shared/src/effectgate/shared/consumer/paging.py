"""Filling one page of a listing up to the bus's message limit (:mod:`effectgate.contracts.bus.paging`).

A responder offers its items in listing order, each already encoded, to a :class:`PageFiller`
sized to what one reply may carry (:func:`items_budget`: the connection's ``max_payload``, less
room for headers and the reply's own fields).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from effectgate.contracts.errors import Problem

__all__ = ["PageFiller", "PageOverflow", "items_budget"]

HEADROOM_BYTES = 1024
"""Room left in ``max_payload`` for a reply's protocol headers, bytes (as
:func:`effectgate.shared.runtime.assembly.fitted`)."""


class PageOverflow(Problem):
    """Not even the smallest summary of an item fits a page (``max_payload`` is tiny)."""


def items_budget(max_payload: int, envelope: bytes) -> int:
    """Bytes a page's items may take: ``max_payload`` less headroom and ``envelope``.

    Args:
        max_payload: the connection's limit, bytes.
        envelope: the reply encoded with no items and its longest cursor and reason.
    """
    return max_payload - HEADROOM_BYTES - len(envelope)


class PageFiller:
    """One page's items (JSON, as :class:`msgspec.Raw`), which were summaries, and the key of the last one.

    Args:
        budget_bytes: what the items may take together, commas included (:func:`items_budget`).
        limit: most items on the page.
    """

    def __init__(self, budget_bytes: int, limit: int) -> None:
        self.items: list[msgspec.Raw] = []
        self.summarised: set[int] = set()
        """Indexes of :attr:`items` taken as a summary."""
        self.last_key: str | None = None
        self._budget, self._limit, self._used = budget_bytes, limit, 0

    def offer(self, key: str, encoded: bytes, summaries: Callable[[], Iterable[bytes]] = tuple) -> bool:
        """Take the item ``encoded`` (listing key ``key``), or on an empty page its first summary that fits.

        Returns:
            ``False`` when the page is full: the item was not taken and opens the next page.

        Raises:
            PageOverflow: the page is empty and neither the item nor any summary of it fits.
        """
        if len(self.items) >= self._limit:
            return False
        if self._fits(encoded):
            return self._take(key, encoded)
        if self.items:
            return False
        for summary in summaries():
            if self._fits(summary):
                self.summarised.add(len(self.items))
                return self._take(key, summary)
        raise PageOverflow(f"item {key!r} does not fit a page of {self._budget} bytes, even summarised")

    def _fits(self, encoded: bytes) -> bool:
        return self._used + len(encoded) + (1 if self.items else 0) <= self._budget

    def _take(self, key: str, encoded: bytes) -> bool:
        self._used += len(encoded) + (1 if self.items else 0)
        self.items.append(msgspec.Raw(encoded))
        self.last_key = key
        return True
