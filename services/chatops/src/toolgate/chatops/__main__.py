"""Run the chat-ops bot: ``python -m toolgate.chatops``."""

import asyncio

from toolgate.chatops.app import create_app

if __name__ == "__main__":
    asyncio.run(create_app().run())
