"""Servers that speak agent-memory over a wire protocol to another process (one module each)."""
