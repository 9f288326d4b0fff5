"""`strata doctor`: checks that Strata can work here, one line per check (ok / warn / FAIL), so a new user or a
support request starts from facts. It never repairs anything: a database it cannot open is reported, not
recreated (on a fresh home it creates what a first run would: the database and the masking key). A home that
cannot be written fails its check and is still read: the masking key and the database (opened read-only)."""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Literal

import anyio

from agent.knowledge_view import knowledge_view
from agent.models import held_api_key
from agent.reading import configured_secrets
from agent.tool_deadlines import unknown_tool_deadlines
from config import LoadedConfig, Settings, load_config
from config.chain_key import chain_key_path
from config.locations import SETTING_KEYS, env_var
from config.masking_key import KEY_FILE, load_masking_key
from config.private_files import loose_paths, private_dir
from core.errors import StrataError
from core.faults import FAULT_ENV
from core.masking import Masker
from core.record import record
from core.terminal_text import one_line
from memory import SqliteEventStore, connect_read_only
from memory.migrations import MIGRATIONS
from memory.opening import open_store

Level = Literal["ok", "warn", "FAIL"]


@record
class Check:
    level: Level
    what: str
    detail: str


def _writable(home: Path) -> Check:
    try:
        private_dir(home)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("FAIL", "home", f"{home} is not writable: {exc.strerror or exc}")
    return Check("ok", "home", str(home))


SHOWN_PATHS = 5


def _permissions(home: Path) -> Check:
    """The home holds raw conversations and keys: others must not read any of it. Reported with the command that
    fixes it; never repaired here."""
    loose = loose_paths(home)
    if not loose:
        return Check("ok", "permissions", f"{home} and everything in it are private to you")
    shown = ", ".join(f"{path} ({mode:04o})" for path, mode in loose[:SHOWN_PATHS])
    more = f" and {len(loose) - SHOWN_PATHS} more" if len(loose) > SHOWN_PATHS else ""
    return Check("warn", "permissions", f"others may read the Strata home: {shown}{more}; "
                                        f"fix: chmod -R go-rwx {shlex.quote(str(home))}")


WRITE_PROBE_TIMEOUT_MS = 200
"""How long doctor waits for the write lock: long enough for a commit in flight, short enough for a check."""


def _write_lock(path: Path) -> str | None:
    """Why the database cannot be locked for writing now (another process holds a write transaction), or None.
    Takes the lock on a connection of its own for a moment, writes nothing and rolls back."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=WRITE_PROBE_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        conn.close()
    return None


async def _postgres(settings: Settings) -> list[Check]:
    """The PostgreSQL store's checks: it connects, its sessions read, and the home holds its key. Opened as the
    reading commands open it: a database of an older schema is not migrated (other, older Strata may work on it)."""
    try:
        store = await open_store(settings, read_only=True)
    except StrataError as exc:
        return [Check("FAIL", "database", exc.message)]
    try:
        sessions = await store.list_sessions()
    except StrataError as exc:
        return [Check("FAIL", "database", exc.message)]
    finally:
        await store.close()
    key = store.chain_key
    return [Check("ok", "database", f"{store.path} ({len(sessions)} sessions)"),
            Check("ok", "chain key", f"{chain_key_path(settings.home)} (key {key.id})") if key is not None else
            Check("FAIL", "chain key", f"{store.chain_problem}: sessions can be read, not verified or continued")]


async def _database(path: Path, *, writable: bool) -> list[Check]:
    """The database's checks. In a home that cannot be written (`writable` False) it is opened read-only, so its
    sessions are still counted and checked; the write-lock probe is left out (the home check already failed)."""
    try:
        store = await SqliteEventStore.open(path, read_only=not writable)
    except StrataError as exc:
        return [Check("FAIL", "database", exc.message)]
    try:
        sessions = await store.list_sessions()
    except StrataError as exc:  # opens, but does not read (a damaged page): reported, left as it is
        return [Check("FAIL", "database", exc.message)]
    finally:
        await store.close()
    key = store.chain_key
    chain = (Check("ok", "chain key", f"{chain_key_path(path.parent)} (key {key.id})") if key is not None else
             Check("FAIL", "chain key", f"{store.chain_problem}: sessions can be read, not verified or continued"))

    def inspect() -> tuple[int, str, str | None]:
        conn = sqlite3.connect(path) if writable else connect_read_only(str(path))
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            quick = conn.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            conn.close()
        return version, quick, _write_lock(path) if writable else None

    try:
        version, quick, unlockable = await anyio.to_thread.run_sync(inspect)
    except sqlite3.Error as exc:
        return [Check("FAIL", "database", f"{path}: {exc}")]
    checks = [Check("ok", "database", f"{path} (schema {version} of {len(MIGRATIONS)}, {len(sessions)} sessions)"),
              chain]
    if quick != "ok":
        checks.append(Check("FAIL", "database integrity", f"PRAGMA quick_check: {quick}"))
    if unlockable is not None:
        checks.append(Check("FAIL", "database lock", f"{path} cannot be locked for writing ({unlockable}): "
                            "another process holds it, so runs and approvals would fail; retry when it is done"))
    active = [s.id for s in sessions if s.status == "awaiting_approval"]
    if active:
        checks.append(Check("warn", "approvals", f"{len(active)} session(s) wait for approval: strata sessions"))
    return checks


def _knowledge(loaded: LoadedConfig, workspace: Path) -> list[Check]:
    """One line per declared dataset (a warning when files are left out of its index, or no mode may read it),
    and one per dataset directory found but not declared."""
    view = knowledge_view(loaded, workspace)
    checks = []
    for d in view.datasets:
        where = ", ".join(d.roots)
        if d.problems:
            more = f" (and {len(d.problems) - 1} more: strata knowledge list)" if len(d.problems) > 1 else ""
            checks.append(Check("warn", f"knowledge {d.name}", f"{d.documents} document(s) from {where}; "
                                f"{len(d.problems)} left out of the index: {d.problems[0]}{more}"))
        elif not d.modes:
            checks.append(Check("warn", f"knowledge {d.name}", f"{d.documents} document(s) from {where}; no mode "
                                f"may read it (modes = [...] in {d.source})"))
        else:
            checks.append(Check("ok", f"knowledge {d.name}", f"{d.documents} document(s) from {where}; modes "
                                f"{', '.join(d.modes)}"))
    for name, paths in (view.undeclared or {}).items():
        checks.append(Check("warn", f"knowledge {name}", f"found at {', '.join(paths)} but not declared, so nothing "
                            f"may read it ([knowledge.datasets.{name}] modes = [...])"))
    return checks


def _mcp(loaded: LoadedConfig) -> list[Check]:
    """Each declared MCP server, started and asked for its tools (then stopped): up or why not, and each tool it
    lists without a resource policy as unavailable, with the reason."""
    if not loaded.mcp.servers:
        return []
    from agent.mcp import MCP_LOG_DIR
    from tool_executor.mcp import ServerStatus, open_mcp

    said: list[str] = []
    # What a server writes to stderr (its log) can quote its environment's secrets: masked on its way there.
    log_masker = Masker.from_env(os.urandom(32), os.environ, extra_secrets=configured_secrets(loaded))

    async def statuses() -> list[ServerStatus]:
        async with open_mcp(loaded.mcp.servers, log_dir=loaded.settings.home / MCP_LOG_DIR,
                            notify=said.append, mask=log_masker.mask) as mcp:
            return mcp.statuses()

    checks: list[Check] = []
    for server in anyio.run(statuses):
        if not server.up:
            checks.append(Check("FAIL", f"mcp {server.name}", f"{one_line(server.problem or '')} ({server.transport} "
                                f"{server.target})"))
            continue
        usable = [t.name for t in server.tools if t.callable]
        checks.append(Check("ok", f"mcp {server.name}", f"{len(usable)} callable tool(s): {', '.join(usable) or '-'}"))
        checks += [Check("warn", f"mcp {server.name}", f"{one_line(t.name)} unavailable: {one_line(t.reason or '')}")
                   for t in server.tools if not t.callable]
    return checks


_TEST_SUITE_VARIABLES = ("STRATA_SCREENSHOTS",)
"""Read by the test suite, not by Strata (with every `STRATA_REQUIRE_*` and `STRATA_*_KILL_ROUNDS`; see README)."""
_DOCUMENTED_NAMES = ("STRATA_MCP_TOKEN",)
"""Names the README gives a variable a flag names (`strata mcp serve --token-env STRATA_MCP_TOKEN`)."""


def _unknown_variables(env: dict[str, str], loaded: LoadedConfig) -> list[Check]:
    """One warning per `STRATA_*` variable Strata does not read (a typo such as `STRATA_MAXTURNS` is otherwise
    silently ignored), with the likeliest meant name. Known: the settings' variables, `STRATA_HOME`, the crash
    tests' `STRATA_FAULT`, the test suite's, and any name the config gives a variable (`[secrets] env`, a hook's
    `env`, a `token_env`). Only doctor looks: no command's start pays for it."""
    given = sorted(k for k in env if k.startswith("STRATA_"))
    if not given:
        return []
    settings = {env_var(key) for key in SETTING_KEYS} | {"STRATA_HOME"}
    named = {*loaded.secrets.env, *(v for h in (*loaded.hooks, *loaded.ignored_hooks) for v in h.env),
             *(c.token_env for c in loaded.channels.channels if c.token_env), loaded.mcp.serve.token_env or ""}
    known = settings | named | {FAULT_ENV, *_TEST_SUITE_VARIABLES, *_DOCUMENTED_NAMES}
    checks = []
    for name in given:
        if name in known or name.startswith("STRATA_REQUIRE_") or name.endswith("_KILL_ROUNDS"):
            continue
        import difflib  # only for a variable Strata does not know

        close = difflib.get_close_matches(name.removeprefix("STRATA_"), [k.upper() for k in SETTING_KEYS], n=1,
                                          cutoff=0.75)
        checks.append(Check("warn", "environment", f"{name} is set but Strata reads no such variable"
                            + (f" (did you mean STRATA_{close[0]}?)" if close else "")))
    return checks


def run_checks(workspace: Path, env: dict[str, str] | None = None) -> list[Check]:
    given = env is not None  # else the model key is the one the command took out of its environment, if any
    env = dict(os.environ) if env is None else env
    checks: list[Check] = []
    py = sys.version_info
    checks.append(Check("ok" if py >= (3, 11) else "FAIL", "python", f"{py.major}.{py.minor}.{py.micro}"))
    try:
        loaded = load_config(workspace=workspace, env=env)
    except StrataError as exc:
        checks.append(Check("FAIL", "config", exc.message))
        return checks
    checks.append(Check("ok", "config", ", ".join(str(f) for f in loaded.files) or "built-in defaults only"))
    checks += [Check("warn", "config", notice) for notice in loaded.notices]
    checks += [Check("FAIL", "config", err.message) for err in unknown_tool_deadlines(loaded)]
    checks += _unknown_variables(env, loaded)
    home = loaded.settings.home
    checks.append(_writable(home))
    writable = checks[-1].level != "FAIL"
    checks.append(_permissions(home))
    if writable or (home / KEY_FILE).exists():  # a home that cannot be written is read, never given a key
        try:
            load_masking_key(home)
            checks.append(Check("ok", "masking key", str(home / KEY_FILE)))
        except StrataError as exc:
            checks.append(Check("FAIL", "masking key", exc.message))
    else:
        checks.append(Check("warn", "masking key", f"{home / KEY_FILE} is missing (a run would create it)"))
    if loaded.settings.db is not None:
        checks += anyio.run(_postgres, loaded.settings)
    elif writable or loaded.settings.db_path.exists():
        checks += anyio.run(partial(_database, loaded.settings.db_path, writable=writable))
    model = loaded.settings.model or "anthropic (the default of strata chat)"
    if model.startswith("anthropic"):
        has_key = bool((env.get("ANTHROPIC_API_KEY", "") if given else held_api_key()).strip())
        checks.append(Check("ok" if has_key else "warn", "model", f"{model}: ANTHROPIC_API_KEY is "
                            + ("set" if has_key else "not set (export it, or use --model script:PATH)")))
    else:
        checks.append(Check("ok", "model", model))
    checks += _knowledge(loaded, workspace)
    checks += _mcp(loaded)
    checks.append(Check("ok" if shutil.which("bash") else "FAIL", "bash", shutil.which("bash") or "not found "
                        "(the bash tool and command hooks need it)"))
    checks.append(Check("ok" if sys.stdin.isatty() else "warn", "terminal",
                        "interactive" if sys.stdin.isatty() else "stdin is not a terminal (strata chat needs one)"))
    # A detail can quote a configured secret (an MCP server's environment value in what the server said, a URL's
    # password, a `[secrets]` value among a server's arguments): masked here, where the config is known.
    masker = Masker.from_env(os.urandom(32), env, extra_secrets=configured_secrets(loaded))
    return [Check(c.level, c.what, masker.mask(c.detail)) for c in checks]


def report(checks: list[Check], echo: Callable[[str], None]) -> int:
    masker = Masker.throwaway()  # details can quote a config value
    for c in checks:
        echo(f"{c.level:<4}  {c.what:<18} {masker.mask(c.detail)}")
    failed = sum(c.level == "FAIL" for c in checks)
    echo(f"{failed} problem(s)" if failed else "all checks passed" + (
        f" ({sum(c.level == 'warn' for c in checks)} warning(s))" if any(c.level == "warn" for c in checks) else ""))
    return 1 if failed else 0
