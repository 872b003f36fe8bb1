"""Fault injection points ("fail points") for fault tests; inert unless configured.

``EFFECTGATE_FAILPOINTS`` holds ``;``-separated rules ``<point>=<action>@<request id prefix>``,
e.g. ``policy.decide=raise@fp-;executor.run=hang@fp-hang-``; a point may have several rules. At
a named point, a request whose id starts with a rule's prefix raises :class:`InjectedFault`
(``raise``) or never returns (``hang``). Without the variable every point is a no-op.
"""

from __future__ import annotations

import asyncio
import os

from effectgate.contracts.errors import Problem

__all__ = ["InjectedFault", "failpoint", "parse_rules"]


class InjectedFault(Problem, RuntimeError):
    """Raised at a fail point configured with ``raise``."""


def parse_rules(text: str) -> dict[str, list[tuple[str, str]]]:
    """Parse ``EFFECTGATE_FAILPOINTS`` into ``{point: [(action, prefix), ...]}``.

    Raises:
        ValueError: a rule is not ``<point>=<raise|hang>@<prefix>``.
    """
    rules: dict[str, list[tuple[str, str]]] = {}
    for rule in filter(None, (part.strip() for part in text.split(";"))):
        point, _, rest = rule.partition("=")
        action, _, prefix = rest.partition("@")
        if not point or action not in ("raise", "hang") or not prefix:
            raise ValueError(f"bad fail point rule {rule!r}: expected <point>=<raise|hang>@<prefix>")
        rules.setdefault(point, []).append((action, prefix))
    return rules


_RULES = parse_rules(os.environ.get("EFFECTGATE_FAILPOINTS", ""))


async def failpoint(point: str, request_id: str) -> None:
    """Fail here if a rule names ``point`` and ``request_id`` starts with its prefix.

    Raises:
        InjectedFault: the rule's action is ``raise``.
    """
    for action, prefix in _RULES.get(point, ()):
        if not request_id.startswith(prefix):
            continue
        if action == "raise":
            raise InjectedFault(f"fail point {point} for {request_id}")
        await asyncio.Event().wait()
