"""Run the registry service: ``python -m toolgate.registry``."""

import asyncio

from toolgate.registry.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
