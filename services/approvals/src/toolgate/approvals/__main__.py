"""Run the approvals service: ``python -m toolgate.approvals``."""

import sys

from toolgate.approvals.app import create_app
from toolgate.shared.service import run_service

if __name__ == "__main__":
    sys.exit(run_service("approvals", create_app))
