"""A module that ends the process as it is imported (a worker must refuse it, not exit as if it had served)."""

import sys

sys.exit(0)
