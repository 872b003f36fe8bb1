"""The surface's probes: ``/livez`` and ``/readyz`` beside its MCP path, as every service serves them."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from effectgate.shared.runtime.nats_watch import ConnectionWatch

__all__ = ["LIVE_PATH", "READY_PATH", "add_probes"]

LIVE_PATH, READY_PATH = "/livez", "/readyz"


def add_probes(app: Starlette, watch: ConnectionWatch) -> None:
    """Serve ``GET /livez`` and ``GET /readyz`` on ``app``, without a token, in the services' shapes.

    ``/livez``: 200 ``{"live": true}``. ``/readyz``: 200 ``{"ready": true, "not_ready": {}}`` while
    the NATS connection is up, else 503 naming why (``{"nats": "not connected to NATS: reconnecting"}``),
    as :class:`effectgate.shared.runtime.health.HealthServer` answers.
    """

    async def live(request: Request) -> JSONResponse:
        return JSONResponse({"live": True})

    async def ready(request: Request) -> JSONResponse:
        why = watch.not_ready()
        missing = {"nats": why} if why else {}
        return JSONResponse({"ready": not missing, "not_ready": missing}, status_code=503 if missing else 200)

    app.add_route(LIVE_PATH, live, methods=["GET"])
    app.add_route(READY_PATH, ready, methods=["GET"])
