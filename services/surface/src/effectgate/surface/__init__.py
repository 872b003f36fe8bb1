"""effectgate's MCP server: any MCP client lists and calls the tools its principal may call, governed."""
