"""Loading the effective configuration. Precedence, lowest first:

    built-in defaults (config/defaults.toml) < user ($XDG_CONFIG_HOME/strata/config.toml)
        < project (<workspace>/.strata/config.toml) < environment (STRATA_*) < flags

Scalars override; policy rules, hooks and secrets accumulate across files. A project file that is not trusted
(`config/trust.py`) still contributes its settings and its `ask`/`deny` rules, never its hooks, its `allow` rules
or a setting of WIDENING_SETTINGS turned on; what was ignored is said once in `notices`. A trusted project's
hooks check, before each run, that the files they execute are the ones trusted (config/hook_files.py). Every
effective scalar records where it came from in `sources`."""

import dataclasses
import functools
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from config._read import ConfigDoc, describe, parse_config, read_config_file
from config._trust_state import TrustState
from config.hook_files import FileProblem, HookFiles
from config.hook_spec import HOOK_EVENTS, HookSpec
from config.knowledge import DEFAULT_COMMON_TERM_SHARE, DatasetDecl, KnowledgeConfig
from config.locations import (
    DEFAULTS_SOURCE,
    SETTING_KEYS,
    _user_home,
    env_var,
    expand_user,
    home_with_source,
    project_config_path,
    user_config_path,
)
from config.mcp import (
    DEFAULT_MCP_TIMEOUT_S,
    DEFAULT_STARTUP_TIMEOUT_S,
    McpConfig,
    McpServeConfig,
    McpServerDecl,
    McpToolPolicy,
)
from config.settings import Settings, flag_name
from core.errors import ConfigError
from core.hashing import sha256_json
from core.hooks import HookSet
from core.policy import PermissionRule
from core.record import record

if TYPE_CHECKING:  # the daemon's channels: imported when a file declares them or the daemon asks (`channels`)
    from config.channels import ChannelEntry, ChannelsConfig

DEFAULTS_FILE = "defaults.toml"
WIDENING_SETTINGS = frozenset({"delegate_grants"})
"""Settings that, turned on, let calls run without a person being asked (as an allow rule does: a child session then
starts with its parent's "always" grants): an untrusted project file cannot turn them on."""


class Secrets(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    values: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    """Names of environment variables whose values are secrets."""


# What KnowledgeConfig() and McpConfig() are (no validators; every field its default), made without building the
# models' validators: a config that declares no dataset or MCP server (the usual one, and `strata resume`'s start)
# then never builds them. ChannelsConfig()'s likewise, made at its first use (`_no_channels`).
_NO_KNOWLEDGE = KnowledgeConfig.model_construct()
_NO_MCP = McpConfig.model_construct()


@functools.cache
def _no_channels() -> "ChannelsConfig":
    """ChannelsConfig() as `_NO_KNOWLEDGE` is KnowledgeConfig(): config/channels.py is imported here, when a config
    that declares no channel is asked for its channels (the serve daemon asks; a session's command never does)."""
    from config.channels import ChannelsConfig

    return ChannelsConfig.model_construct()


class ToolDeadline(BaseModel):
    """A tool's deadline set by a config file (`[tools.NAME] timeout_s`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tool: str
    timeout_s: float
    source: str


@record
class LoadedConfig:
    """What `load_config` found: the validated settings and everything derived from the files (a record, not a
    model: it is built here from values already validated, never parsed)."""

    settings: Settings
    sources: dict[str, str]
    """Setting key -> where its effective value came from: `built-in defaults`, a file path,
    `environment variable STRATA_X`, `flag --x`."""
    rules: tuple[PermissionRule, ...] = ()
    """Active policy rules, lowest precedence file first; each rule's `source` is its file."""
    hooks: tuple[HookSpec, ...] = ()
    """Active hooks, lowest precedence file first."""
    secrets: Secrets = Secrets()
    notices: tuple[str, ...] = ()
    project_file: Path | None = None
    """The workspace's project file, when it exists."""
    project_trusted: bool = False
    """True only when a project file exists and its current sha256 is the trusted one."""
    project_sha256: str | None = None
    user_sha256: str | None = None
    """The sha256 of the user file's bytes that were validated; None without a user file."""
    project_trust: TrustState | None = None
    """`trusted`, `untrusted`, or `changed` (trusted once, edited since); None without a project file."""
    ignored_rules: tuple[PermissionRule, ...] = ()
    """`allow` rules of an untrusted project file (shown by `strata config show`, never applied)."""
    ignored_hooks: tuple[HookSpec, ...] = ()
    """Hooks of an untrusted project file."""
    files: tuple[str, ...] = ()
    """Config files that were read, lowest precedence first (the built-in defaults not included)."""
    tool_timeouts: tuple[ToolDeadline, ...] = ()
    """Deadlines of tools set by config files, one per tool (the highest precedence file's)."""
    project_root: Path | None = None
    """The workspace (resolved) whose project file was read."""
    project_files: dict[str, str] | None = None
    """For a trusted project: the fingerprints its trust recorded of what the hooks execute (None: none recorded,
    a record older than that check)."""
    project_hooks_digest: str | None = None
    """Digest of the active (trusted) project hooks, recorded by a session that starts with them; None without."""
    project_hooks_problem: FileProblem | None = None
    """Why the trusted project's hooks would refuse to run now (a file they execute changed since the trust)."""
    knowledge: KnowledgeConfig = _NO_KNOWLEDGE
    """Declared knowledge datasets (an untrusted project's are ignored) and the common-term share."""
    mcp: McpConfig = _NO_MCP
    """Declared MCP servers with their tools' policies (an untrusted project's are never started)."""
    declared_channels: "ChannelsConfig | None" = None
    """The serve daemon's channels and DAEMON-mode settings as the files declare them; None when none declares
    `[[channels]]` or `[daemon]` (`channels` is then the defaults)."""

    @property
    def channels(self) -> "ChannelsConfig":
        """The serve daemon's channels and DAEMON-mode settings (config/channels.py)."""
        return self.declared_channels if self.declared_channels is not None else _no_channels()

    @property
    def trust_command(self) -> str:
        return _trust_command(self.project_root or Path("."))

    def hook_set(self) -> HookSet:
        """The runtime hooks. The project's own check the files they execute before every run (one stat cache
        shared between them); a user file's hooks are the user's and are not checked."""
        project = [h for h in self.hooks if h.project]
        guard = (HookFiles(self.project_root, self.project_files, self.trust_command)
                 if project and self.project_root is not None else None)
        return HookSet(tuple(h.to_hook(functools.partial(guard.check, h.command) if guard and h.project else None)
                             for h in self.hooks))


def load_config(*, workspace: Path | None, env: Mapping[str, str] | None = None,
                flags: Mapping[str, object] | None = None) -> LoadedConfig:
    """The effective config for a workspace (None: no project layer). `env` defaults to the process environment;
    `flags` maps setting keys to command-line values (None values are ignored)."""
    env = os.environ if env is None else env
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    unknown = sorted(set(given) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"unknown setting (known: {', '.join(Settings.model_fields)})", key=unknown[0])

    home, home_source = home_with_source(env)
    if "home" in given:
        home, home_source = Path(str(given["home"])).expanduser(), f"flag {flag_name('home')}"

    defaults = _defaults()
    user = _read_if_present(user_config_path(env))
    project = _read_if_present(project_config_path(workspace)) if workspace is not None else None
    state: TrustState = "untrusted"
    project_files: dict[str, str] | None = None
    if project is not None:  # the trust record and its models only where there is a project file to look up
        from config.trust import lookup

        state, project_files = lookup(home, project.path, project.sha256)
    docs = [d for d in (defaults, user, project) if d is not None]

    if project is not None and project.data.db is not None:  # a repository must not send sessions elsewhere
        raise ConfigError("a project file cannot choose the event store", file=project.source, key="db",
                          hint="set STRATA_DB, or `db` in the user's config file")
    values: dict[str, object] = {"home": home}
    sources: dict[str, str] = {"home": home_source}
    widening: list[str] = []
    for doc in docs:
        for key in SETTING_KEYS:
            if (value := getattr(doc.data, key)) is not None:
                if doc is project and state != "trusted" and key in WIDENING_SETTINGS and value is True:
                    widening.append(key)  # like an allow rule: lets calls run unasked, so only from trust
                    continue
                values[key], sources[key] = value, doc.source
    for key in SETTING_KEYS:
        if env.get(var := env_var(key)):
            values[key], sources[key] = env[var], f"environment variable {var}"
    for key, value in given.items():
        if key != "home":
            values[key], sources[key] = value, f"flag {flag_name(key)}"
    sources = {key: sources.get(key, DEFAULTS_SOURCE) for key in Settings.model_fields}
    settings = _validate(values, sources)

    rules: list[PermissionRule] = []
    ignored_rules: list[PermissionRule] = []
    hooks: list[HookSpec] = []
    ignored_hooks: list[HookSpec] = []
    secret_values: dict[str, None] = {}
    secret_env: dict[str, None] = {}
    deadlines: dict[str, ToolDeadline] = {}
    for doc in docs:
        untrusted = doc is project and state != "trusted"
        for r in doc.data.policy.rules:
            rule = PermissionRule(action=r.action, tool=r.tool, pattern=r.pattern, args=dict(r.args),
                                  source=doc.source)
            (ignored_rules if untrusted and r.action == "allow" else rules).append(rule)
        for event in HOOK_EVENTS:
            for index, h in enumerate(getattr(doc.data.hooks, event)):
                timeout = h.timeout_s if h.timeout_s is not None else settings.hook_timeout_s
                spec = HookSpec(event=event, matcher=h.matcher, command=h.command, timeout_s=timeout,
                                source=doc.source, index=index, env=tuple(h.env), project=doc is project)
                (ignored_hooks if untrusted else hooks).append(spec)
        secret_values.update(dict.fromkeys(doc.data.secrets.values))
        secret_env.update(dict.fromkeys(doc.data.secrets.env))
        for tool, entry in doc.data.tools.items():
            if entry.timeout_s is not None:
                deadlines[tool] = ToolDeadline(tool=tool, timeout_s=entry.timeout_s, source=doc.source)

    knowledge = _knowledge(docs, project=project, trusted=state == "trusted", root=workspace, env=env)
    channels = _channels(docs, project, settings.home)

    mcp = _mcp(docs, project=project, trusted=state == "trusted")

    notices: list[str] = []
    if project is not None and mcp.ignored:
        notices.append(f"project config {project.path} is not trusted: its MCP servers ({', '.join(mcp.ignored)}) "
                       f"are not started; run `{_trust_command(project.path.parent.parent)}` after reviewing it")
    if project is not None and knowledge.ignored:
        notices.append(f"project config {project.path} is not trusted: its knowledge datasets "
                       f"({', '.join(knowledge.ignored)}) are ignored; run "
                       f"`{_trust_command(project.path.parent.parent)}` after reviewing it")
    if project is not None and widening:
        turned_on = ", ".join(f"{key} = true" for key in widening)
        notices.append(f"project config {project.path} is not trusted: its {turned_on} is ignored; run "
                       f"`{_trust_command(project.path.parent.parent)}` after reviewing it")
    if project is not None and (ignored_rules or ignored_hooks):
        notices.append(untrusted_notice(project.path, state, hooks=len(ignored_hooks), allow_rules=len(ignored_rules)))
    root = workspace.expanduser().resolve() if workspace is not None else None
    project_hooks = [h for h in hooks if h.project]
    problem = None
    if project is not None and project_hooks and root is not None:
        problem = HookFiles(root, project_files, _trust_command(root)).problem(h.command for h in project_hooks)
        if problem is not None:
            notices.append(f"project config {project.path} is trusted, but its hooks will not run and fail closed "
                           f"(each blocks what it judges): {problem.text()}; review the project and run "
                           f"`{_trust_command(root)}` to trust it again")

    return LoadedConfig(
        settings=settings, rules=tuple(rules), hooks=tuple(hooks),
        secrets=Secrets(values=tuple(secret_values), env=tuple(secret_env)), sources=sources,
        notices=tuple(notices), project_file=project.path if project else None,
        project_trusted=state == "trusted" and project is not None,
        project_sha256=project.sha256 if project else None, user_sha256=user.sha256 if user else None,
        project_trust=state if project else None,
        ignored_rules=tuple(ignored_rules),
        ignored_hooks=tuple(ignored_hooks), files=tuple(d.source for d in (user, project) if d is not None),
        tool_timeouts=tuple(deadlines[t] for t in sorted(deadlines)),
        project_root=root,
        project_files=project_files if state == "trusted" else None,
        project_hooks_digest=sha256_json([h.identity() for h in project_hooks]) if project_hooks else None,
        project_hooks_problem=problem,
        knowledge=knowledge, mcp=mcp, declared_channels=channels,
    )


def _mcp(docs: list[ConfigDoc], *, project: ConfigDoc | None, trusted: bool) -> McpConfig:
    """The MCP servers of the files in precedence order: a later file replaces a server's table whole; an
    untrusted project's servers are set aside (declaring one runs its command)."""
    servers: dict[str, McpServerDecl] = {}
    ignored: list[str] = []
    serve = _NO_MCP.serve
    for doc in docs:
        section = doc.data.mcp
        if section is None:  # the file has no [mcp] table
            continue
        if doc is project and not trusted:
            ignored.extend(section.servers)
            continue
        if section.serve is not None:
            serve = McpServeConfig(roots=tuple(section.serve.roots), allow_tools=tuple(section.serve.allow_tools),
                                   token_env=section.serve.token_env)
        for name, entry in section.servers.items():
            tools = tuple((tool, McpToolPolicy(
                safety=t.safety, effect=t.effect, pii=t.pii, resource_keys=tuple(t.resource_keys),
                timeout_s=t.timeout_s if t.timeout_s is not None else DEFAULT_MCP_TIMEOUT_S,
                path_args=tuple(t.path_args))) for tool, t in sorted(entry.tools.items()))
            servers[name] = McpServerDecl(
                name=name, command=entry.command, args=tuple(entry.args), env=tuple(sorted(entry.env.items())),
                url=entry.url, tools=tools, source=doc.source,
                startup_timeout_s=entry.startup_timeout_s or DEFAULT_STARTUP_TIMEOUT_S)
    if not servers and not ignored and serve == _NO_MCP.serve:
        return _NO_MCP
    return McpConfig(servers=tuple(servers[n] for n in sorted(servers)), ignored=tuple(sorted(set(ignored))),
                     serve=serve)


def _channels(docs: list[ConfigDoc], project: ConfigDoc | None, home: Path) -> "ChannelsConfig | None":
    """The daemon's channels and DAEMON-mode settings: a later file's `[[channels]]` list replaces an earlier one
    whole, `[daemon]` keys override one by one. A project file may set neither (config/channels.py). None when no
    file declares either (the defaults: `LoadedConfig.channels`)."""
    found: ChannelsConfig | None = None
    for doc in docs:
        if doc is project:
            if doc.data.channels is not None or doc.data.daemon is not None:
                raise ConfigError("a project file cannot configure the daemon's channels or DAEMON mode",
                                  file=doc.source, key="channels" if doc.data.channels is not None else "daemon",
                                  hint="put `[[channels]]` and `[daemon]` in the user's config file")
            continue
        update: dict[str, object] = {}
        if doc.data.channels is not None:
            names = [c.name for c in doc.data.channels]
            if len(set(names)) != len(names):
                raise ConfigError("two channels have the same name", file=doc.source, key="channels")
            _distinct_folders(doc.data.channels, doc.source, home)
            update["channels"] = tuple(doc.data.channels)
        if doc.data.daemon is not None:
            if doc.data.daemon.enable is not None:
                update["enable"] = tuple(doc.data.daemon.enable)
            if doc.data.daemon.turn_budget_s is not None:
                update["turn_budget_s"] = doc.data.daemon.turn_budget_s
            if doc.data.daemon.max_workers is not None:
                update["max_workers"] = doc.data.daemon.max_workers
            if doc.data.daemon.max_sessions is not None:
                update["max_sessions"] = doc.data.daemon.max_sessions
        if doc.data.channels is not None or doc.data.daemon is not None:  # the files' tables are validated already
            found = (found or _no_channels()).model_copy(update=update)
    return found


def _folders(entry: "ChannelEntry", home: Path, source: str) -> tuple[Path, Path] | None:
    """A channel's inbox and outbox: a spool's as configured, a webhook's in the home (agent/channels/_webhook.py)."""
    if entry.kind == "webhook":
        folder = home.expanduser().resolve() / "channels" / entry.name
        return folder / "in", folder / "out"
    if entry.inbox is None or entry.outbox is None:
        return None
    inbox, outbox = (expand_user(p, file=source, key=f"channels.{entry.name}.{side}").resolve()
                     for side, p in (("inbox", entry.inbox), ("outbox", entry.outbox)))
    return inbox, outbox


def _distinct_folders(channels: "list[ChannelEntry]", source: str, home: Path) -> None:
    """A spool channel's inbox is neither its own outbox (its replies would be read as messages) nor any other
    channel's inbox or outbox, a webhook's folders in the home included (two pollers would take the same files, or
    one the other's replies). The error names the spool's key (a webhook's folders are not configured)."""
    owner: dict[Path, str] = {}  # inbox -> what it is
    webhooks_first = sorted(channels, key=lambda e: e.kind != "webhook")
    for entry in webhooks_first:
        folders = _folders(entry, home, source)
        if folders is None:
            continue
        inbox, outbox = folders
        key = f"channels.{entry.name}"
        if inbox == outbox:
            raise ConfigError(f"the outbox is the channel's inbox ({inbox}); they must be two folders",
                              file=source, key=f"{key}.outbox")
        if inbox in owner:
            raise ConfigError(f"the inbox {inbox} is also {owner[inbox]}; each channel needs its own",
                              file=source, key=f"{key}.inbox")
        owner[inbox] = f"{key}.inbox" if entry.kind == "spool" else f"the queue of the webhook {key}"
    for entry in webhooks_first:
        folders = _folders(entry, home, source)
        if folders is None or folders[1] not in owner:
            continue
        replies = folders[1]
        if entry.kind == "webhook":  # a spool's inbox is the webhook's reply folder
            raise ConfigError(f"the inbox {replies} is the reply folder of the webhook channels.{entry.name}; its "
                              "replies would be read as messages", file=source, key=owner[replies])
        raise ConfigError(f"the outbox {replies} is {owner[replies]}; its replies would be read as messages",
                          file=source, key=f"channels.{entry.name}.outbox")


def _knowledge(docs: list[ConfigDoc], *, project: ConfigDoc | None, trusted: bool, root: Path | None,
               env: Mapping[str, str]) -> KnowledgeConfig:
    """The knowledge datasets of the files in precedence order: a later file replaces a dataset's table whole; an
    untrusted project's declarations are set aside (declaring a dataset grants access to files)."""
    share = DEFAULT_COMMON_TERM_SHARE
    datasets: dict[str, DatasetDecl] = {}
    ignored: list[str] = []
    for doc in docs:
        section = doc.data.knowledge
        if section is None:  # the file has no [knowledge] table
            continue
        if section.common_term_share is not None:
            share = section.common_term_share
        if doc is project and not trusted:
            ignored.extend(section.datasets)
            continue
        for name, entry in section.datasets.items():
            path = None
            if entry.path is not None:
                path = _dataset_path(entry.path, doc, name, workspace=root if doc is project else None, env=env)
            datasets[name] = DatasetDecl(name=name, path=path, pii=entry.pii, modes=tuple(entry.modes),
                                         source=doc.source, from_project=doc is project)
    if not datasets and not ignored and share == _NO_KNOWLEDGE.common_term_share:
        return _NO_KNOWLEDGE
    return KnowledgeConfig(common_term_share=share, datasets=tuple(datasets[n] for n in sorted(datasets)),
                           ignored=tuple(sorted(set(ignored))))


def _dataset_path(raw: str, doc: ConfigDoc, name: str, *, workspace: Path | None, env: Mapping[str, str]) -> Path:
    """`~` is the user's home as the environment given says (like the config file's own location)."""
    if raw == "~" or raw.startswith("~/"):
        path = _user_home(env) / raw[2:]
    else:
        path = expand_user(raw, file=doc.source, key=f"knowledge.datasets.{name}.path")
    if not path.is_absolute():
        if workspace is None:
            raise ConfigError(f"must be an absolute path or start with ~ (got {raw!r})", file=doc.source,
                              key=f"knowledge.datasets.{name}.path")
        path = workspace.expanduser().resolve() / path
    return path


def load_settings(env: Mapping[str, str] | None = None, **flags: object) -> Settings:
    """The effective settings without a project layer (defaults < user file < environment < flags)."""
    return load_config(workspace=None, env=env, flags=flags).settings


def _trust_command(root: Path) -> str:
    return f"strata trust {shlex.quote(str(root))}"


def untrusted_notice(path: Path, state: TrustState, *, hooks: int, allow_rules: int) -> str:
    parts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((hooks, "hook"), (allow_rules, "allow rule")) if n]
    what = " and ".join(parts) + (" are" if hooks + allow_rules > 1 else " is")
    command = f"strata trust {shlex.quote(str(path.parent.parent))}"
    if state == "changed":
        return (f"project config {path} changed since it was trusted: its {what} ignored; "
                f"run `{command}` again after reviewing it")
    return f"project config {path} is not trusted: its {what} ignored; run `{command}` after reviewing it"


def _defaults() -> ConfigDoc:
    resource = Path(__file__).with_name(DEFAULTS_FILE)  # package data beside this module (pyproject.toml)
    doc = parse_config(resource.read_bytes(), path=resource, source=str(resource))
    return dataclasses.replace(doc, source=DEFAULTS_SOURCE)


def _read_if_present(path: Path) -> ConfigDoc | None:
    """The file's config, or None when nothing is there. A symlink is there even when it leads nowhere (to a file
    moved away, or round to itself): that file cannot be read, which is an error, never the defaults instead."""
    return read_config_file(path) if os.path.lexists(path) else None


def _validate(values: dict[str, object], sources: dict[str, str]) -> Settings:
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else None
        origin = sources.get(key or "", DEFAULTS_SOURCE)
        if origin.startswith(("environment variable", "flag")):
            raise ConfigError(describe(err, origin=origin), key=key) from None
        raise ConfigError(describe(err), file=origin, key=key) from None
