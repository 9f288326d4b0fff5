"""MCP servers' tools in sessions (the client side; the tools themselves are tool_executor/mcp)."""

from agent.mcp._runtime import MCP_LOG_DIR, with_mcp_tools

__all__ = ["MCP_LOG_DIR", "with_mcp_tools"]
