"""Small MCP servers the MCP tests start as real processes (``tiny.py``), written with the SDK."""
