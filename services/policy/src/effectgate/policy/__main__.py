"""Run the policy service: ``python -m effectgate.policy``."""

import sys

from effectgate.policy.app import create_app
from effectgate.shared.runtime.assembly import run_service

if __name__ == "__main__":
    sys.exit(run_service("policy", create_app))
