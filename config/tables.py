"""The tables of a config file that most files do not have: `[tools.NAME]`, `[knowledge]` and `[mcp]`.

Their models are made (and this module imported) only when a file holds one of these tables, or something asks
for them (config/schema.py `_OwnValidator`): a plain `strata resume` reads files without them and never makes
them (tests/cli/test_startup_imports.py). Every check, default and error is what it was when they were defined
in config/schema.py."""

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from config._fields import ArgName, Command, EnvName, ToolName, _no_entries, _Table
from config.settings import CommonTermShare, ToolSeconds
from core.events import Mode
from core.knowledge import DATASET_PATTERN
from core.tools.spec import EffectClass, PiiClass, SafetyLevel

_DATASET_NAME = re.compile(DATASET_PATTERN)

def _dataset_name(value: str) -> str:
    if not _DATASET_NAME.match(value):
        raise ValueError("a dataset name is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
    return value


def _dataset_path(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


def _distinct_modes(value: list[Mode]) -> list[Mode]:
    repeated = sorted({m for m in value if value.count(m) > 1})
    if repeated:
        raise ValueError(f"mode {repeated[0]!r} is listed twice")
    return value

DatasetName = Annotated[str, AfterValidator(_dataset_name)]
DatasetPath = Annotated[str, AfterValidator(_dataset_path)]

class ToolEntry(_Table):
    """`[tools.grep]`: settings of one tool."""

    timeout_s: ToolSeconds | None = None
    """The deadline of each call of the tool (None: the tool's own; for `bash` it caps the call's `timeout_s`)."""


class DatasetEntry(_Table):
    """`[knowledge.datasets.NAME]`: a knowledge dataset, where it is read from and who may read it."""

    path: DatasetPath | None = None
    """Its root directory: absolute or starting with `~` (a project file may give it relative to the workspace).
    None: `$XDG_DATA_HOME/strata/knowledge/NAME` and, in a trusted project, `.strata/knowledge/NAME`."""
    pii: PiiClass = "internal"
    """The PII class of what it holds; the knowledge tools carry the highest of the datasets a mode may read."""
    modes: Annotated[list[Mode], AfterValidator(_distinct_modes)] = Field(default_factory=_no_entries)
    """The session modes granted to read it (none by default: a grant is always written down)."""


class KnowledgeSection(_Table):
    common_term_share: CommonTermShare | None = None
    """A term found in more than this share of a dataset's documents does not count as a match there."""
    datasets: dict[DatasetName, DatasetEntry] = Field(default_factory=dict)


_MCP_SERVER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$")


def _mcp_server_name(value: str) -> str:
    if not _MCP_SERVER.match(value) or len(value) > 64:
        raise ValueError("an MCP server name is 1 to 64 letters, digits, '-' or single '_' (it becomes part of "
                         "`mcp__SERVER__TOOL`)")
    return value


def _resource_key(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    try:
        value.format_map(_AnyArgs())
    except (ValueError, IndexError) as exc:
        raise ValueError(f"not a valid template ({exc})") from None
    return value


class _AnyArgs(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return ""


def _loopback_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must be an http:// or https:// URL")
    return value


McpServerName = Annotated[str, AfterValidator(_mcp_server_name)]
ResourceKeyTemplate = Annotated[str, AfterValidator(_resource_key)]
McpUrl = Annotated[str, AfterValidator(_loopback_url)]


class McpToolEntry(_Table):
    """`[mcp.servers.NAME.tools.TOOL]`: the resource policy that makes an MCP tool callable."""

    safety: SafetyLevel
    effect: EffectClass
    pii: PiiClass = "none"
    resource_keys: list[ResourceKeyTemplate] = Field(default_factory=_no_entries)
    """Templates over the call's arguments: `"issue:{repo}/{number}"`."""
    timeout_s: ToolSeconds | None = None
    path_args: list[ArgName] = Field(default_factory=_no_entries)


class McpServerEntry(_Table):
    """`[mcp.servers.NAME]`: a server started over stdio (`command`, `args`, `env`) or reached at `url`."""

    command: Command | None = None
    args: list[str] = Field(default_factory=_no_entries)
    env: dict[EnvName, str] = Field(default_factory=dict)
    url: McpUrl | None = None
    startup_timeout_s: ToolSeconds | None = None
    tools: dict[ToolName, McpToolEntry] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerEntry":
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("`args` and `env` apply only to a `command` server")
        return self


class McpServeEntry(_Table):
    roots: list[DatasetPath] = Field(default_factory=_no_entries)
    allow_tools: list[ToolName] = Field(default_factory=_no_entries)
    token_env: EnvName | None = None
    """With `--http`: the environment variable holding the bearer token requests must bear."""


class McpSection(_Table):
    servers: dict[McpServerName, McpServerEntry] = Field(default_factory=dict)
    serve: McpServeEntry | None = None



ToolsTable = dict[ToolName, ToolEntry]
"""`[tools]`: one `ToolEntry` per tool name."""
