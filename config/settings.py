"""Effective settings. Precedence so far: built-in defaults < environment (`STRATA_*`) < flags (applied by the
CLI). Every bad value is a ConfigError naming where it came from, the key and the reason."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import ConfigError

Durability = Literal["full", "normal"]


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    home: Path
    durability: Durability = "full"
    max_turns: int = Field(default=50, ge=1, le=1_000_000)
    model: str | None = None
    """Default model when `--model` is not given (e.g. `script:/path/turns.json`)."""

    @property
    def db_path(self) -> Path:
        return self.home / "strata.db"


_ENV_KEYS = {"STRATA_DURABILITY": "durability", "STRATA_MAX_TURNS": "max_turns", "STRATA_MODEL": "model"}


def default_home(env: Mapping[str, str]) -> Path:
    if env.get("STRATA_HOME"):
        return Path(env["STRATA_HOME"]).expanduser()
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "strata"


def load_settings(env: Mapping[str, str] | None = None, **flags: object) -> Settings:
    env = os.environ if env is None else env
    values: dict[str, object] = {"home": default_home(env)}
    sources: dict[str, str] = {"home": "STRATA_HOME"}
    for var, key in _ENV_KEYS.items():
        if env.get(var):
            values[key] = env[var]
            sources[key] = f"environment variable {var}"
    for key, value in flags.items():
        if value is not None:
            values[key] = value
            sources[key] = f"flag --{key.replace('_', '-')}"
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        raise ConfigError(err["msg"], file=sources.get(key, "built-in defaults"), key=key) from None
