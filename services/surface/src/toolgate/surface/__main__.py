"""Run the MCP surface: ``python -m toolgate.surface`` (settings from ``TOOLGATE_SURFACE_*``)."""

import sys

from pydantic import ValidationError

from toolgate.shared.logs import configure_logging
from toolgate.surface.app import run
from toolgate.surface.settings import SurfaceSettings

if __name__ == "__main__":
    configure_logging("surface")
    try:
        settings = SurfaceSettings()
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        print(f"the MCP surface cannot start: {problems}", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(settings))
