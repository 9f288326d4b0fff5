"""What a reading command's quick way needs of the config (agent/cli/quick_timeline.py, quick_sessions.py): the
home, its SQLite file and the secrets to mask with, read without the config's models. Only where that is exactly
what a full load (config/loader.py) would give: no `STRATA_*` setting in the environment (a full load checks it),
and each config file either absent or holding bytes a full load validated (config/checked.py), and no store named
(PostgreSQL is the full way's). None otherwise: the caller takes the full way, which reports what is wrong."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config._regular_file import read_regular
from config.checked import Role, was_checked
from config.locations import SETTING_KEYS, default_home, env_var, project_config_path, user_config_path
from core.errors import ConfigError
from core.record import record

_SHORTEST_SERVER_SECRET = 4
"""An MCP server's environment value shorter than this is not masked (config/mcp.py `secret_values`)."""


@record
class QuickConfig:
    """What a reading command needs of the config without loading it: the home and the secrets to mask."""

    home: Path
    secrets: tuple[str, ...]
    """The secrets the user's file names (config/loader.py and agent/reading.py `configured_secrets`)."""

    @property
    def db_path(self) -> Path:
        return self.home / "strata.db"


def known_valid(home: Path, role: Role, path: Path) -> dict[str, Any] | None:
    """The file's table when a full load validated exactly its bytes; {} when there is no such file; None when it
    is not known valid (or cannot be read)."""
    try:
        data = read_regular(path)  # never a FIFO or a device (config/_read.py)
    except FileNotFoundError:
        return None if os.path.lexists(path) else {}  # a symlink to nothing: the full way reports it
    except OSError:
        return None
    if not was_checked(home, role, data):
        return None
    import tomllib  # only when there is a file to read

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # undecodable, bad TOML, a number too long, too deep: the full way says
        return None


def _secrets(doc: dict[str, Any], env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The secrets the file names, or None when it does not hold them in the shapes a full load validates: the
    record of valid files is advisory (a stale or forged digest), so the quick way never trusts it with a shape
    it would misread (a string of `values` read letter by letter) or fail on (an internal error): the full way
    names the file, key and reason."""
    section, mcp = doc.get("secrets", {}), doc.get("mcp", {})
    if not (isinstance(section, dict) and isinstance(mcp, dict)):
        return None
    values, names, servers = section.get("values", []), section.get("env", []), mcp.get("servers", {})
    if not (_strings(values) and _strings(names) and isinstance(servers, dict)):
        return None
    server_values: list[str] = []
    for server in servers.values():
        table = server.get("env", {}) if isinstance(server, dict) else None
        if not (isinstance(table, dict) and _strings(list(table.values()))):
            return None
        server_values += [v for v in table.values() if len(v) >= _SHORTEST_SERVER_SECRET]
    return (*values, *(env[n] for n in names if env.get(n)), *server_values)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def quick_config(env: Mapping[str, str] | None = None) -> QuickConfig | None:
    """The home (no project layer), or None when only a full load can say what the config is."""
    env = os.environ if env is None else env
    if any(env_var(key) in env for key in SETTING_KEYS):
        return None
    try:
        home = default_home(env)
        config_path = user_config_path(env)
    except ConfigError:  # a path the environment gives cannot be expanded: the full way reports it
        return None
    user = known_valid(home, "user", config_path)
    if user is None or "db" in user:
        return None
    secrets = _secrets(user, env)
    return None if secrets is None else QuickConfig(home=home, secrets=secrets)


def project_known_valid(home: Path, workspace: str) -> bool:
    """Whether a session's project layer needs no full load: its workspace is gone (the full way reads no project
    file then either), has no project file, or one whose bytes a full load validated."""
    return _project_doc(home, workspace) is not None


def project_adds_no_secrets(home: Path, workspace: str) -> bool:
    """Whether the session's project layer is known valid (`project_known_valid`) and names no secret the masker
    would add (config/loader.py accumulates a project's `[secrets]`; a trusted project's MCP servers give theirs):
    then the user's file and the environment are all a reading command's masker is made of besides the home's own
    (agent/reading.py `configured_secrets`). A project file with either table: the full way, which knows whether the
    project is trusted."""
    doc = _project_doc(home, workspace)
    return doc is not None and "secrets" not in doc and "mcp" not in doc


def _project_doc(home: Path, workspace: str) -> dict[str, Any] | None:
    root = Path(workspace)
    if not root.is_dir():
        return {}
    return known_valid(home, "project", project_config_path(root))
