"""Run the chat-ops bot: ``python -m effectgate.chatops``.

A configuration it cannot start with ends it at once with one line naming the setting
(exit code 2), which ``effectgate up`` shows; never a traceback.
"""

import asyncio
import sys

from effectgate.chatops.app import create_app
from effectgate.chatops.settings import startup_problem
from effectgate.shared.runtime.logs import configure_logging


def main() -> int:
    """Start the bot and run it until stopped; 2 when its configuration is unusable."""
    configure_logging("chatops")  # first: what the bot logs while it is built is formatted too
    try:
        app = create_app()
    except Exception as error:  # every start-up failure it can name is one line; others propagate
        if (problem := startup_problem(error)) is None:
            raise
        print(f"chatops cannot start: {problem}", file=sys.stderr)
        return 2
    asyncio.run(app.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
