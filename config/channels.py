"""The serve daemon's channels and its DAEMON mode (`[[channels]]`, `[daemon]`): where unattended work comes from.

    [daemon]
    enable = ["bash"]          # execute/admin tools kept in channel sessions' plans (removed otherwise)
    turn_budget_s = 300        # wall-clock budget of one message's turn
    max_workers = 32           # threads handled at once (1 to 1024); the others wait their turn, in order
    max_sessions = 128         # sessions `strata serve` hosts at once for clients (1 to 4096)

    [[channels]]
    name = "inbox"             # unique; the key of its threads
    kind = "spool"             # or "webhook"
    inbox = "/srv/strata/in"   # spool: the folders (created when missing)
    outbox = "/srv/strata/out"
    workspace = "/srv/project" # where the channel's sessions work
    model = "anthropic:claude-sonnet-4-5"
    threads = ["*"]            # globs over thread ids this channel's poller may take
    on_ask = "deny"            # or "park": an `ask` waits on the worklist for `strata approve`
    keep_replies_days = 30     # replies nothing needs any more are removed this long after they were written
    keep_rejected_days = 30    # rejected/ files are removed this long after they were set aside

Channels are read from the built-in defaults and the user's file only: a project file (a workspace's) never opens
a door into the daemon, and its `[[channels]]` or `[daemon]` tables are a ConfigError."""

import re
import urllib.parse
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from core.vocabulary import OnAsk

__all__ = ["ChannelEntry", "ChannelKind", "ChannelsConfig", "DaemonSection"]

ChannelKind = Literal["spool", "webhook"]
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DEFAULT_TURN_BUDGET_S = 300.0
DEFAULT_BODY_CAP = 1024 * 1024
DEFAULT_KEEP_IDS_DAYS = 30
DEFAULT_KEEP_REPLIES_DAYS = 30
DEFAULT_KEEP_REJECTED_DAYS = 30
DEFAULT_MAX_WORKERS = 32
MAX_WORKERS_CAP = 1024
DEFAULT_MAX_SESSIONS = 128
MAX_SESSIONS_CAP = 4096


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError("a channel name is 1 to 64 lower-case letters, digits, '_' or '-', starting with a letter "
                         "or digit")
    return value


def _callback_url(value: str) -> str:
    """http or https, a host, a port in range when given, nothing blank or unprintable. The reasons never quote the
    URL (its query or user part may carry a token; config/_read.py does not show this key's value either)."""
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("must be a URL without blanks or control characters")
    try:
        url = urllib.parse.urlsplit(value)
        host = url.hostname
    except ValueError:  # an unclosed [ of an IPv6 host
        raise ValueError("must name a host (an IPv6 host in brackets)") from None
    if url.scheme not in ("http", "https"):
        raise ValueError("must be an http or https URL")
    if not host:
        raise ValueError("must name a host")
    try:
        url.port  # noqa: B018 - parsed for its check: a port that is not a number, or out of range, raises
    except ValueError:
        raise ValueError("must have a port that is a number from 1 to 65535") from None
    if url.port == 0:
        raise ValueError("must have a port that is a number from 1 to 65535")
    return value


def _path(value: str) -> str:
    if not value.strip() or "\x00" in value:
        raise ValueError("must be a non-empty path without NUL")
    return value


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class ChannelEntry(_Table):
    name: Annotated[str, AfterValidator(_name)]
    kind: ChannelKind
    workspace: Annotated[str, AfterValidator(_path)]
    model: Annotated[str, Field(min_length=1)] | None = None
    """The model of the channel's sessions; the settings' `model` when absent."""
    inbox: Annotated[str, AfterValidator(_path)] | None = None
    outbox: Annotated[str, AfterValidator(_path)] | None = None
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    token_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    """webhook: the environment variable holding the bearer token (a token never sits in a config file)."""
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = DEFAULT_BODY_CAP
    callback_url: Annotated[str, Field(max_length=2000), AfterValidator(_callback_url)] | None = None
    """webhook: where each reply is also POSTed (header `Idempotency-Key`), until the callback answers 2xx."""
    keep_ids_days: Annotated[int, Field(ge=1, le=36500)] | None = None
    """webhook: how long a message id's record (`ids/`, its thread, for the 409) is kept after the id was last
    accepted; a record whose message still waits in the queue is kept however old (default 30 days)."""
    keep_replies_days: Annotated[int, Field(ge=1, le=36500)] = DEFAULT_KEEP_REPLIES_DAYS
    """How long a reply file (the outbox, a webhook's `out/`, with its `delivered/` markers) is kept after it was
    written, once nothing needs it: its message acknowledged in the book, no uncertain `reply` effect of its session
    (whose probe reads it), and, on a webhook, taken (posted to the callback or fetched) and its id's record gone."""
    keep_rejected_days: Annotated[int, Field(ge=1, le=36500)] = DEFAULT_KEEP_REJECTED_DAYS
    """How long a rejected message file (and its `.error`) is kept in `rejected/` after it was set aside."""
    threads: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=lambda: ["*"])
    on_ask: OnAsk = "deny"

    @model_validator(mode="after")
    def _complete(self) -> "ChannelEntry":
        if self.kind == "spool" and (self.inbox is None or self.outbox is None):
            raise ValueError(f"spool channel {self.name!r} needs `inbox` and `outbox`")
        if self.kind == "webhook" and (self.port is None or self.token_env is None):
            raise ValueError(f"webhook channel {self.name!r} needs `port` and `token_env`")
        if self.kind == "spool" and self.callback_url is not None:
            raise ValueError(f"spool channel {self.name!r} has no `callback_url` (its replies are outbox files)")
        if self.kind == "spool" and self.keep_ids_days is not None:
            raise ValueError(f"spool channel {self.name!r} has no `keep_ids_days` (it keeps no id records)")
        return self


class DaemonSection(_Table):
    enable: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]+$")]] | None = None
    turn_budget_s: Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)] | None = None
    max_workers: Annotated[int, Field(ge=1, le=MAX_WORKERS_CAP)] | None = None
    max_sessions: Annotated[int, Field(ge=1, le=MAX_SESSIONS_CAP)] | None = None


ChannelList = list[ChannelEntry] | None
"""What a file's `[[channels]]` is validated as (config/schema.py `ConfigFile.channels`)."""
DaemonTable = DaemonSection | None
"""What a file's `[daemon]` is validated as (config/schema.py `ConfigFile.daemon`)."""


class ChannelsConfig(BaseModel):
    """The channels and DAEMON-mode settings as they apply (defaults < user file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    channels: tuple[ChannelEntry, ...] = ()
    enable: tuple[str, ...] = ()
    turn_budget_s: float = DEFAULT_TURN_BUDGET_S
    max_workers: int = DEFAULT_MAX_WORKERS
    """Threads whose messages are handled at once, across the daemon's channels; the others wait their turn."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Sessions the daemon hosts at once for its clients (agent/daemon/_host.py): past it, one hosted session with no
    client attached and no turn running leaves the host (resumable, hosted again when attached), or, with none such,
    `new_session` and `attach` are refused (`too_many_sessions`)."""
