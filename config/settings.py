"""Effective scalar settings and the paths they are read from. `config/loader.py` layers them: built-in defaults
(`config/defaults.toml`) < user file < project file < environment (`STRATA_*`) < flags.

The value types here are shared with the file schema (`config/schema.py`), so a value is checked by the same
constraint whichever layer it comes from."""


from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from config.locations import SETTING_KEYS
from core.vocabulary import Durability, OnAsk

"""What `ask` means in a mode with no human: a denial, or the session parked as `awaiting_approval`."""

MAX_TURNS_LIMIT = 1_000_000
"""The most turns a session may be given (`--max-turns`, `max_turns` in a config file or over MCP)."""
MaxTurns = Annotated[int, Field(ge=1, le=MAX_TURNS_LIMIT)]
ModelSpec = Annotated[str, Field(min_length=1)]
DAY_S = 86_400
Seconds = Annotated[float, Field(gt=0, le=DAY_S, allow_inf_nan=False)]
"""A wait for resource locks: up to a day (a longer wait is a mistake, not a setting: a huge one would never end)."""
HookSeconds = Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)]
ToolSeconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
"""A tool call's deadline: long enough for any read, short enough that nothing waits for ever."""
RepairBudget = Annotated[int, Field(ge=0, le=1000)]
"""Repairs per request: far more than any Stop hook needs, short of a loop that would never end."""
ContextBudget = Annotated[int, Field(ge=1, le=10_000_000)]
"""Estimated tokens: several times the largest model context there is."""
SnapshotEvery = Annotated[int, Field(ge=0, le=1_000_000)]
"""Events between snapshots (0: none); more than a million would make a resume replay that many."""
DrainSeconds = Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
CommonTermShare = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
DelegateDepth = Annotated[int, Field(ge=0, le=16)]
StoreUrl = Annotated[str, Field(pattern=r"^postgres(ql)?://\S+$", max_length=2000)]
"""A PostgreSQL URL for the event store (memory/postgres/)."""


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    home: Path
    durability: Durability = "full"
    max_turns: MaxTurns = 50
    model: ModelSpec | None = None
    """Default model when `--model` is not given (e.g. `script:/path/turns.json`)."""
    on_ask: OnAsk = "deny"
    lock_timeout_s: Seconds = 30.0
    """How long a call waits for its resource locks before it fails."""
    hook_timeout_s: HookSeconds = 10.0
    """Timeout of a hook command that does not set its own `timeout_s`."""
    repair_budget: RepairBudget = 2
    """How many times Stop hooks may send the model back to repair its work before the session ends."""
    context_budget_tokens: ContextBudget = 150_000
    """Estimated tokens a model request may carry before older turns are compacted into a summary."""
    snapshot_every: SnapshotEvery = 500
    """Events between snapshots of a session's state, which resume starts from (0: no snapshots)."""
    drain_grace_s: DrainSeconds = 10.0
    """`strata serve` on SIGTERM: how long running calls may still finish before their batches are closed as
    Ctrl-C closes them."""
    delegate_max_depth: DelegateDepth = 2
    """A session this many delegations deep gets no `delegate` tool (0: no delegation at all)."""
    delegate_in_daemon: bool = False
    """Whether sessions in mode `daemon` (the serve daemon's channels) get the `delegate` tool."""
    delegate_grants: bool = False
    """Whether a child session starts with its parent's "always" grants (recorded in the child as passed down)."""
    db: StoreUrl | None = None
    """The event store on PostgreSQL (`STRATA_DB`, or `db` in the user's file; never a project's); none: SQLite
    in the home (`db_path`)."""

    @property
    def db_path(self) -> Path:
        return self.home / "strata.db"


def without_password(url: str) -> str:
    """A store URL as it may be shown: its password replaced by `***` (the URL itself is not a secret)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def shown_setting(key: str, value: object) -> object:
    """A setting's value as `config show` prints it."""
    return without_password(value) if key == "db" and isinstance(value, str) else value


if set(Settings.model_fields) - {"home"} != set(SETTING_KEYS):  # config/locations.py names them without the model
    raise RuntimeError("config/locations.py SETTING_KEYS does not name exactly Settings' fields")


def flag_name(key: str) -> str:
    return f"--{key.replace('_', '-')}"
