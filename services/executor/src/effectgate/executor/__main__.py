"""Run the executor service: ``python -m effectgate.executor``."""

import sys

from effectgate.executor.app import create_app
from effectgate.shared.runtime.assembly import run_service

if __name__ == "__main__":
    sys.exit(run_service("executor", create_app))
