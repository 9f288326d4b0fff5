"""Where Strata's files are, from the environment alone: the home, the user's config file, a project's config file,
and the names of the scalar settings (`STRATA_*` variables). Plain functions of stdlib types, so a command that only
reads (agent/cli/quick_timeline.py) can find its database without importing the config's models; the models
(config/settings.py) re-export these and check that `SETTING_KEYS` names exactly their fields."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SETTING_KEYS: tuple[str, ...] = (
    "durability", "max_turns", "model", "on_ask", "lock_timeout_s", "hook_timeout_s", "repair_budget",
    "context_budget_tokens", "snapshot_every", "drain_grace_s", "delegate_max_depth", "delegate_in_daemon",
    "delegate_grants", "db",
)
"""The scalar keys a config file, a `STRATA_*` variable or a flag may set (`home` comes from the environment)."""

DEFAULTS_SOURCE = "built-in defaults"

PROJECT_DIR = ".strata"
"""A project's own Strata directory: its config, and the hook scripts that config runs. The agent's tools never
write it (the scope check), and trust covers every file in it."""


def env_var(key: str) -> str:
    return f"STRATA_{key.upper()}"


def expand_user(raw: str, *, variable: str | None = None, file: str | None = None, key: str | None = None) -> Path:
    """`raw` with a leading `~` or `~name` expanded. `~name` of a user this system does not have (a typo for
    `~/name`) is a ConfigError naming where it was written: the environment `variable`, or the config `file` and
    `key` (Path.expanduser raises a bare RuntimeError)."""
    try:
        return Path(raw).expanduser()
    except RuntimeError:
        from core.errors import ConfigError  # only on this error: the start of every command reads these paths

        name = raw[1:].partition("/")[0]
        reason = f"{raw!r} starts with ~{name}, but there is no user {name!r} (write ~/ for your own home)"
        raise ConfigError(f"environment variable {variable}: {reason}" if variable else reason, file=file,
                          key=key) from None


def _user_home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def home_with_source(env: Mapping[str, str]) -> tuple[Path, str]:
    """Strata's data directory and where that choice came from."""
    if env.get("STRATA_HOME"):
        return _named(expand_user(env["STRATA_HOME"], variable="STRATA_HOME"), "STRATA_HOME"), \
            "environment variable STRATA_HOME"
    if env.get("XDG_DATA_HOME"):
        return (_named(expand_user(env["XDG_DATA_HOME"], variable="XDG_DATA_HOME"), "XDG_DATA_HOME") / "strata",
                "environment variable XDG_DATA_HOME")
    return _user_home(env) / ".local" / "share" / "strata", DEFAULTS_SOURCE


NAME_MAX = 255
"""Bytes in one file name (Linux and macOS): a longer part makes every stat of the home fail with ENAMETOOLONG."""


def _named(path: Path, variable: str) -> Path:
    """`path`, unless a part of it is longer than a file name can be: then a ConfigError naming the variable (every
    command would otherwise fail on its first look at the home, some of them with an internal error)."""
    if any(len(os.fsencode(part)) > NAME_MAX for part in path.parts):
        from core.errors import ConfigError  # only on this error (see expand_user)

        raise ConfigError(f"environment variable {variable}: a part of the path is longer than {NAME_MAX} bytes, "
                          "which no file name can be")
    return path


def default_home(env: Mapping[str, str]) -> Path:
    return home_with_source(env)[0]


def user_config_path(env: Mapping[str, str]) -> Path:
    base = (expand_user(env["XDG_CONFIG_HOME"], variable="XDG_CONFIG_HOME") if env.get("XDG_CONFIG_HOME")
            else _user_home(env) / ".config")
    return base / "strata" / "config.toml"


def project_config_path(workspace: Path) -> Path:
    """The project file of a workspace, absolute with symlinks resolved (the key trust is recorded under). A
    symlink that leads nowhere (to a missing file, or round to itself) is named as it is spelled, so reading it
    says what is wrong with it rather than finding no file (config/_read.py)."""
    spelled = workspace.expanduser().resolve() / PROJECT_DIR / "config.toml"
    try:
        real = spelled.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
        return spelled
    return spelled if os.path.islink(spelled) and not os.path.exists(real) else real
