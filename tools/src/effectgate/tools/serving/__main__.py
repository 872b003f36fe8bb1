"""``python -m effectgate.tools.serving MODULE --name NAME [--public-keys DIR] [--max-concurrent N]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from effectgate.tools.serving.running import run


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the worker; the exit code of :func:`~effectgate.tools.serving.running.run`."""
    parser = argparse.ArgumentParser(prog="python -m effectgate.tools.serving", description="Serve Python tools.")
    parser.add_argument("module", help="the module declaring the tools (importable, e.g. acme_tools.payments)")
    parser.add_argument("--name", required=True, help="the worker's name: the <worker> of python:<worker>")
    keys, most = (
        "directory holding receipts.pub (default $EFFECTGATE_PUBLIC_KEYS_DIR)",
        "calls run at once (default 16)",
    )
    parser.add_argument("--public-keys", type=Path, help=keys)
    parser.add_argument("--max-concurrent", type=int, help=f"{most}, or $EFFECTGATE_WORKER_MAX_CONCURRENT")
    args = parser.parse_args(argv)
    return run(args.module, args.name, args.public_keys, args.max_concurrent)


if __name__ == "__main__":
    sys.exit(main())
