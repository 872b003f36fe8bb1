"""Puts the example's package on ``sys.path`` for its tests (it is not a workspace package)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
