"""Run the registry service: ``python -m toolgate.registry``."""

import sys

from toolgate.registry.app import create_app
from toolgate.shared.service import run_service

if __name__ == "__main__":
    sys.exit(run_service("registry", create_app))
