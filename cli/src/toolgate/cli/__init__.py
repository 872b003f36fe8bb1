"""The toolgate command line."""
