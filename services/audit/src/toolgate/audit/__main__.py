"""Run the audit service: ``python -m toolgate.audit``."""

import asyncio

from toolgate.audit.app import create_app
from toolgate.shared.logs import configure_logging

if __name__ == "__main__":
    configure_logging("audit")  # first: what the service logs while it is built is formatted too
    asyncio.run(create_app().run())
