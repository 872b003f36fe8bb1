"""Run the audit service: ``python -m effectgate.audit``."""

import sys

from effectgate.audit.app import create_app
from effectgate.shared.runtime.assembly import run_service

if __name__ == "__main__":
    sys.exit(run_service("audit", create_app))
