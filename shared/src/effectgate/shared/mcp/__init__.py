"""MCP servers as configured: their settings, their tool listings as descriptors, their stderr, HTTP upstreams."""
