"""A package of declared tools, scanned by the tests (no curated TOOLS list)."""
