"""`strata mcp serve`: Strata as an MCP server for MCP hosts (the official SDK's `MCPServer`): `run_agent`,
`get_timeline`, `list_sessions`. Imported only by that command."""

from agent.mcp_serve._listen import ListenAddress, parse_listen
from agent.mcp_serve._server import build_server, serve

__all__ = ["ListenAddress", "build_server", "parse_listen", "serve"]
