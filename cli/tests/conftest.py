"""The CLI's consoles, built while ``COLUMNS`` is unset, so each test's own ``COLUMNS`` decides its width.

A rich ``Console`` built while ``COLUMNS`` is set keeps that width for good; one built without
it reads ``COLUMNS`` each time it prints. The CLI builds its consoles when
:mod:`effectgate.cli.client.session` is first imported, which a command may do lazily inside a
test that sets ``COLUMNS`` (``CliRunner(env=...)``), and a test process may inherit one (the
pytest-xdist workers do). So the inherited width is dropped and the consoles are built here,
first, whichever tests run before which in the process.
"""

from __future__ import annotations

import os

os.environ.pop("COLUMNS", None)

import effectgate.cli.client.session  # noqa: F401  # builds the consoles while COLUMNS is unset
