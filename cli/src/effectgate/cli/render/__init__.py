"""How the CLI prints: rich views, tables fitted to the terminal, JSON for scripts."""
