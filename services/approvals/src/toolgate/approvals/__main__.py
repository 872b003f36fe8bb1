"""Run the approvals service: ``python -m toolgate.approvals``."""

import asyncio

from toolgate.approvals.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
