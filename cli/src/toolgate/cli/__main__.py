"""``python -m toolgate.cli``: the ``toolgate`` command."""

from toolgate.cli.app import main

if __name__ == "__main__":
    main()
