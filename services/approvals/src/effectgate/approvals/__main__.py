"""Run the approvals service: ``python -m effectgate.approvals``."""

import sys

from effectgate.approvals.app import create_app
from effectgate.shared.runtime.assembly import run_service

if __name__ == "__main__":
    sys.exit(run_service("approvals", create_app))
