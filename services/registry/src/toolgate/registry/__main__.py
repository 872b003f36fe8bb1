"""Run the registry service: ``python -m toolgate.registry``."""

import asyncio

from toolgate.registry.app import create_app
from toolgate.shared.logs import configure_logging

if __name__ == "__main__":
    configure_logging("registry")  # first: what the service logs while it is built is formatted too
    asyncio.run(create_app().run())
