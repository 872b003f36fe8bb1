"""Run the executor service: ``python -m toolgate.executor``."""

import asyncio

from toolgate.executor.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
