"""Tools from MCP servers (the official `mcp` SDK's client over stdio or streamable HTTP): a server's tool is
`mcp__SERVER__TOOL`, callable only with the resource policy config declares for it (config/mcp.py), and goes
through the whole tool-call path like a built-in. Imported only by what starts servers (never at CLI start)."""

from tool_executor.mcp._hub import McpTools, ServerStatus, open_mcp
from tool_executor.mcp._tools import PREFIX, ToolStatus, mcp_tool_name

__all__ = ["PREFIX", "McpTools", "ServerStatus", "ToolStatus", "mcp_tool_name", "open_mcp"]
