"""Run the registry service: ``python -m effectgate.registry``."""

import sys

from effectgate.registry.app import create_app
from effectgate.shared.runtime.assembly import run_service

if __name__ == "__main__":
    sys.exit(run_service("registry", create_app))
