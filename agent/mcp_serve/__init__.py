"""`strata mcp serve`: Strata as an MCP server for MCP hosts (the official SDK's `MCPServer`): `run_agent`,
`get_timeline`, `list_sessions`. Imported only by that command."""

from agent.mcp_serve._auth import MIN_TOKEN_CHARS, BearerGate, bearer_token
from agent.mcp_serve._listen import ListenAddress, parse_listen
from agent.mcp_serve._server import build_server, serve

__all__ = ["MIN_TOKEN_CHARS", "BearerGate", "ListenAddress", "bearer_token", "build_server", "parse_listen", "serve"]
