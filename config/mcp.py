"""MCP servers as config declares them, each tool's resource policy, and what `strata mcp serve` allows.

    [mcp.servers.tracker]                 # stdio: a child process Strata starts (in its own process group)
    command = "python3"
    args = ["tracker_server.py"]
    env = { TRACKER_TOKEN = "..." }       # added to a minimal environment (values are masked like secrets)
    startup_timeout_s = 10                # initialise and list tools within this, or the server is left out

    [mcp.servers.docs]                    # streamable HTTP
    url = "http://127.0.0.1:8931/mcp"

    [mcp.servers.tracker.tools.close_issue]   # the resource policy that makes `mcp__tracker__close_issue` callable
    safety = "write"                      # read | write | execute | network | admin
    effect = "effectful"                  # read_only | idempotent | effectful
    pii = "internal"                      # none | internal | personal | sensitive (default none)
    resource_keys = ["issue:{repo}/{number}"]   # templates over the call's arguments (locks, receipts)
    timeout_s = 30
    path_args = []                        # arguments that name workspace paths (the scope check confines them)

    [mcp.serve]                           # `strata mcp serve`
    roots = ["~/projects"]                # where `run_agent` may put its workspace (default: the server's cwd)
    allow_tools = ["web_fetch"]           # tools the default deny list would remove that the operator adds back
    token_env = "STRATA_MCP_TOKEN"        # with --http: the variable holding the bearer token (16+ characters)

A server is declared by the user file, or by a project file **only once the project is trusted** (an untrusted
project's servers are never started, not even to list their tools; the notice says so). A later file replaces a
server's table whole. A tool a server lists without a policy here is listed as unavailable, never offered."""

from pydantic import BaseModel, ConfigDict

from core.tools.spec import EffectClass, PiiClass, SafetyLevel

DEFAULT_STARTUP_TIMEOUT_S = 10.0
DEFAULT_MCP_TIMEOUT_S = 30.0


class McpToolPolicy(BaseModel):
    """The declared resource policy of one tool of one server."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    safety: SafetyLevel
    effect: EffectClass
    pii: PiiClass = "none"
    resource_keys: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_MCP_TIMEOUT_S
    path_args: tuple[str, ...] = ()

    def identity(self) -> dict[str, object]:
        return self.model_dump(mode="json")


class McpServerDecl(BaseModel):
    """One `[mcp.servers.NAME]` table as it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    tools: tuple[tuple[str, McpToolPolicy], ...] = ()
    """Tool name (as the server names it) -> its policy, sorted by name."""
    source: str
    """The file that declared it."""

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"

    def policy(self, tool: str) -> McpToolPolicy | None:
        return dict(self.tools).get(tool)

    def target(self) -> str:
        """What is started or reached, for listings."""
        return self.url if self.url is not None else " ".join([self.command or "", *self.args])


class McpServeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    roots: tuple[str, ...] = ()
    """Where `run_agent` may put its workspace (empty: the server's working directory)."""
    allow_tools: tuple[str, ...] = ()
    token_env: str | None = None
    """The environment variable holding the bearer token `--http` requires (agent/mcp_serve/_auth.py)."""


class McpConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    servers: tuple[McpServerDecl, ...] = ()
    """Sorted by name."""
    ignored: tuple[str, ...] = ()
    """Servers declared by an untrusted project file (never started)."""
    serve: McpServeConfig = McpServeConfig.model_construct()  # what McpServeConfig() is, without building it

    def secret_values(self) -> list[str]:
        """Values given to servers' environments: known secrets, masked on every observation surface (not in the
        live conversation, which is shown as it is)."""
        return [value for server in self.servers for _, value in server.env if len(value) >= 4]
