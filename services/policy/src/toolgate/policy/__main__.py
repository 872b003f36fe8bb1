"""Run the policy service: ``python -m toolgate.policy``."""

import asyncio

from toolgate.policy.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
