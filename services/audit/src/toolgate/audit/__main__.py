"""Run the audit service: ``python -m toolgate.audit``."""

import asyncio

from toolgate.audit.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
