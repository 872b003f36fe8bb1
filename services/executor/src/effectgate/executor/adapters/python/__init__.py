"""Python tools served by tool workers on the bus (adapter ``python:<worker>``): :mod:`.host`."""
