"""Run the approvals service: ``python -m toolgate.approvals``."""

import asyncio

from toolgate.approvals.app import create_app
from toolgate.shared.logs import configure_logging

if __name__ == "__main__":
    configure_logging("approvals")  # first: what the service logs while it is built is formatted too
    asyncio.run(create_app().run())
