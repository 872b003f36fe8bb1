"""``python -m effectgate.cli``: the ``effectgate`` command."""

from effectgate.cli.app import main

if __name__ == "__main__":
    main()
