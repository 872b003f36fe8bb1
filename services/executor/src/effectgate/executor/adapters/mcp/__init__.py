"""MCP servers the executor calls: sessions, the warden that keeps each warm, breakers, state announcements."""
