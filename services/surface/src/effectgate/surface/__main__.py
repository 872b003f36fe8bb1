"""Run the MCP surface: ``python -m effectgate.surface`` (settings from ``EFFECTGATE_SURFACE_*``)."""

import sys

from pydantic import ValidationError

from effectgate.shared.runtime.logs import configure_logging
from effectgate.surface.app import run
from effectgate.surface.settings import SurfaceSettings

if __name__ == "__main__":
    configure_logging("surface")
    try:
        settings = SurfaceSettings()
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in error.errors())
        print(f"the MCP surface cannot start: {problems}", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(settings))
