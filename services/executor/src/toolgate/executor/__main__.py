"""Run the executor service: ``python -m toolgate.executor``."""

import asyncio

from toolgate.executor.app import create_app
from toolgate.shared.logs import configure_logging

if __name__ == "__main__":
    configure_logging("executor")  # first: what the service logs while it is built is formatted too
    asyncio.run(create_app().run())
