"""The policy service's request-reply router: every answer of :mod:`effectgate.policy.handlers`' edges."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from faststream.nats import NatsRouter

from effectgate.policy.handlers.decisions import PolicyRuntime, route_recheck
from effectgate.policy.handlers.listings import route_listings
from effectgate.policy.handlers.operator import route_operator

__all__ = ["build_router"]


def build_router(runtime: Callable[[], PolicyRuntime], clock: Callable[[], datetime]) -> NatsRouter:
    """Answer re-checks (signed), per-caller listings, readiness and publications.

    ``tg.policy.recheck`` (:mod:`~effectgate.policy.handlers.decisions`); ``tg.tools.list.<p>`` /
    ``tg.tools.get.<p>`` (:mod:`~effectgate.policy.handlers.listings`); ``tg.policy.ready`` and
    ``tg.policy.publish`` (:mod:`~effectgate.policy.handlers.operator`). The budgets' answers are
    added by :func:`~effectgate.policy.handlers.operator.route_budgets`.
    """
    router = NatsRouter()
    route_listings(router, runtime)
    route_operator(router, runtime)
    route_recheck(router, runtime, clock)
    return router
