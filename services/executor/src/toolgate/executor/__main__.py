"""Run the executor service: ``python -m toolgate.executor``."""

import sys

from toolgate.executor.app import create_app
from toolgate.shared.service import run_service

if __name__ == "__main__":
    sys.exit(run_service("executor", create_app))
