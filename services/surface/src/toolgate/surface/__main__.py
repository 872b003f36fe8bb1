"""Run the MCP surface: ``python -m toolgate.surface`` (settings from ``TOOLGATE_SURFACE_*``)."""

import asyncio

from toolgate.shared.logs import configure_logging
from toolgate.surface.app import serve
from toolgate.surface.settings import SurfaceSettings

if __name__ == "__main__":
    configure_logging("surface")
    asyncio.run(serve(SurfaceSettings()))
