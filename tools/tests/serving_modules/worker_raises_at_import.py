"""A module whose import raises (a worker refuses it naming the error)."""

raise RuntimeError("no database configured")
