"""The shape of one config file (`config/defaults.toml`, the user file, a project's `.strata/config.toml`).

Every table forbids unknown keys and every value is checked strictly (a TOML string is not a number), so a typo is
an error naming the key rather than a setting silently ignored. Scalars are optional here: a file sets only what
it overrides. Lists of rules and hooks accumulate across files (`config/loader.py`)."""

import importlib
import re
import typing
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, GetCoreSchemaHandler, TypeAdapter
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, core_schema

from config._fields import ArgName, Command, EnvName, ToolName, _env_name, _no_entries, _Table
from config.settings import (
    ContextBudget,
    DelegateDepth,
    DrainSeconds,
    HookSeconds,
    MaxTurns,
    ModelSpec,
    RepairBudget,
    Seconds,
    SnapshotEvery,
    StoreUrl,
)
from core.faults import FAULT_ENV
from core.policy import RuleAction, unclosed_bracket
from core.vocabulary import Durability, OnAsk

if TYPE_CHECKING:
    from config.channels import ChannelEntry, DaemonSection
    from config.tables import KnowledgeSection, McpSection, ToolEntry

_TOOL_GLOB = re.compile(r"^[A-Za-z0-9_.:*?\[\]!-]+$")


def _glob(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if unclosed_bracket(value):
        raise ValueError("invalid glob: a '[' is never closed by ']'")
    return value


def _tool_glob(value: str) -> str:
    _glob(value)
    if not _TOOL_GLOB.match(value):
        raise ValueError("a tool glob may use only letters, digits, '_', '.', ':', '-' and the wildcards * ? [ ] !")
    return value


def _hook_env_name(value: str) -> str:
    _env_name(value)
    if value == FAULT_ENV:
        raise ValueError(f"{FAULT_ENV} (crash-test fault injection) is never passed to hooks")
    return value


Glob = Annotated[str, AfterValidator(_glob)]
ToolGlob = Annotated[str, AfterValidator(_tool_glob)]
HookEnvName = Annotated[str, AfterValidator(_hook_env_name)]
SecretValue = Annotated[str, Field(min_length=4)]
"""Shorter values would mask ordinary text wherever it appears."""


class _OwnValidator:
    """`Annotated[T, _OwnValidator()]`: a table validated by its own validator (T's, strict), built the first time
    a file holds that table, not as part of ConfigFile's: most files have no `[mcp]`, `[knowledge]`, `[tools]`,
    `[[channels]]` or `[daemon]`, the built-in defaults' `[policy]`, `[hooks]` and `[secrets]` hold empty arrays
    only (`_empty_arrays`), and building their validators was a good part of every command's start
    (bench/cli_startup.py). Validation is the same: the same checks and errors (pydantic puts the field's name
    in front of the inner errors' locations), an instance of T taken as it is. The field's default must not be
    validated either: `default_factory=T.model_construct` (what `T()` is for a table whose keys all have
    defaults).

    `_OwnValidator("NAME")`: T is config/tables.py's NAME, and that module (its models) is imported only when a
    file holds the table (`Annotated[Any, ...]` at run time; `table_type` names T). `_OwnValidator("NAME",
    "config.channels")`: the same, of another module (the daemon's `[[channels]]` and `[daemon]`)."""

    def __init__(self, later: str | None = None, module: str = "config.tables") -> None:
        self._later = later
        self._module = module

    def table_type(self, source: Any) -> Any:
        """T: the annotation itself, or the module's name (the module imported here)."""
        if self._later is None:
            return source
        return getattr(importlib.import_module(self._module), self._later)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        adapter: list[TypeAdapter[Any]] = []
        found: list[tuple[Any, bool]] = []  # (T, whether it is a model), once known

        def validate(value: Any) -> Any:
            if not found:
                table = self.table_type(source)
                found.append((table, isinstance(table, type) and issubclass(table, BaseModel)))
            table, model = found[0]
            if model and _empty_arrays(table, value):
                return table.model_construct(**{key: [] for key in value})  # what validating it gives
            if not adapter:  # a model brings its own (strict) config; a list or union of models is strict here
                adapter.append(TypeAdapter(table) if model else TypeAdapter(table, config=ConfigDict(strict=True)))
            return adapter[0].validate_python(value)

        return core_schema.no_info_plain_validator_function(validate)


def field_type(field: FieldInfo) -> Any:
    """What a file's value for `field` is validated as: its annotation, or its table's type (`_OwnValidator`)."""
    for meta in field.metadata:
        if isinstance(meta, _OwnValidator):
            return meta.table_type(field.annotation)
    return field.annotation


def _empty_arrays(model: type[BaseModel], value: Any) -> bool:
    """Whether `value` is a table of nothing but `model`'s own array fields, each empty (`[policy] rules = []`, as
    the built-in defaults have it): validating it checks only that each is an array and gives the model with
    those fields empty (new lists), which `model_construct` makes without the validator. Not for a model with
    validators of its own, nor a field with constraints of its own (an empty array could fail those)."""
    if type(value) is not dict:
        return False
    found = model.__pydantic_decorators__
    if found.validators or found.field_validators or found.root_validators or found.model_validators:
        return False
    fields = model.model_fields
    return all(type(items) is list and not items and key in fields and typing.get_origin(fields[key].annotation)
               is list and not fields[key].metadata for key, items in value.items())


class RuleEntry(_Table):
    """`[[policy.rules]]`: `{ tool = "bash", args = { command = "git *" }, action = "allow" }`."""

    tool: ToolGlob
    action: RuleAction
    pattern: Glob | None = None
    """Glob over the tool's primary argument (the command for `bash`, the path for file tools) and its path
    arguments (`grep`'s `path`)."""
    args: dict[ArgName, Glob] = Field(default_factory=dict)


class PolicySection(_Table):
    rules: list[RuleEntry] = Field(default_factory=_no_entries)


class HookEntry(_Table):
    """`[[hooks.pre_tool_use]]` and friends: `{ matcher = "write_*", command = "python3 check.py", timeout_s = 5 }`."""

    matcher: ToolGlob = "*"
    command: Command
    """Run by the shell."""
    timeout_s: HookSeconds | None = None
    """None: the top-level `hook_timeout_s`."""
    env: list[HookEnvName] = Field(default_factory=_no_entries)
    """Environment variables passed to the command although `bash` does not get them (by default a hook gets
    exactly what `bash` gets: no Strata credentials, no `STRATA_*`)."""


class HooksSection(_Table):
    pre_tool_use: list[HookEntry] = Field(default_factory=_no_entries)
    post_tool_use: list[HookEntry] = Field(default_factory=_no_entries)
    stop: list[HookEntry] = Field(default_factory=_no_entries)
    observe: list[HookEntry] = Field(default_factory=_no_entries)
    """Observation hooks: get lifecycle events (started, resumed, parked, interrupted, ended) and cannot change
    the run."""


class SecretsSection(_Table):
    values: list[SecretValue] = Field(default_factory=_no_entries)
    """Extra secret values to mask wherever they appear."""
    env: list[EnvName] = Field(default_factory=_no_entries)
    """Names of environment variables whose values are secrets to mask."""


class ConfigFile(_Table):
    durability: Durability | None = None
    max_turns: MaxTurns | None = None
    model: ModelSpec | None = None
    on_ask: OnAsk | None = None
    lock_timeout_s: Seconds | None = None
    hook_timeout_s: HookSeconds | None = None
    repair_budget: RepairBudget | None = None
    context_budget_tokens: ContextBudget | None = None
    snapshot_every: SnapshotEvery | None = None
    drain_grace_s: DrainSeconds | None = None
    delegate_max_depth: DelegateDepth | None = None
    delegate_in_daemon: bool | None = None
    delegate_grants: bool | None = None
    db: StoreUrl | None = None
    policy: Annotated[PolicySection, _OwnValidator()] = Field(default_factory=PolicySection.model_construct)
    hooks: Annotated[HooksSection, _OwnValidator()] = Field(default_factory=HooksSection.model_construct)
    secrets: Annotated[SecretsSection, _OwnValidator()] = Field(default_factory=SecretsSection.model_construct)
    if TYPE_CHECKING:
        tools: dict[ToolName, ToolEntry] = Field(default_factory=dict)
        knowledge: KnowledgeSection | None = None
        mcp: McpSection | None = None
    else:  # config/tables.py, imported only for a file that holds one of these tables (_OwnValidator)
        tools: Annotated[Any, _OwnValidator("ToolsTable")] = Field(default_factory=dict)
        knowledge: Annotated[Any, _OwnValidator("KnowledgeSection")] = None
        mcp: Annotated[Any, _OwnValidator("McpSection")] = None
    """`tools`: per-tool settings; a later file overrides an earlier one tool by tool. `knowledge`: knowledge
    datasets (config/knowledge.py); a later file replaces a dataset's table whole. `mcp`: MCP servers and their
    tools' policies (config/mcp.py); a later file replaces a server's table whole. None: the file has no such
    table (config/loader.py reads that as the table with nothing in it)."""
    if TYPE_CHECKING:
        channels: list[ChannelEntry] | None = None
        daemon: DaemonSection | None = None
    else:  # config/channels.py, imported only for a file that holds one of these tables (_OwnValidator)
        channels: Annotated[Any, _OwnValidator("ChannelList", "config.channels")] = None
        daemon: Annotated[Any, _OwnValidator("DaemonTable", "config.channels")] = None
    """`channels`: the serve daemon's channels (config/channels.py); the user's file only. `daemon`: its DAEMON-mode
    settings."""
