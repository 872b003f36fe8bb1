"""Run the policy service: ``python -m toolgate.policy``."""

import sys

from toolgate.policy.app import create_app
from toolgate.shared.service import run_service

if __name__ == "__main__":
    sys.exit(run_service("policy", create_app))
