"""Run the policy service: ``python -m toolgate.policy``."""

import asyncio

from toolgate.policy.app import create_app
from toolgate.shared.logs import configure_logging

if __name__ == "__main__":
    configure_logging("policy")  # first: what the service logs while it is built is formatted too
    asyncio.run(create_app().run())
