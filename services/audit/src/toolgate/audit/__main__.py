"""Run the audit service: ``python -m toolgate.audit``."""

import sys

from toolgate.audit.app import create_app
from toolgate.shared.service import run_service

if __name__ == "__main__":
    sys.exit(run_service("audit", create_app))
