"""Project trust. A project's `.strata/config.toml` comes with the code it sits in, so whoever wrote the
repository wrote it. Until `strata trust DIR` records the file's sha256, its hooks (shell commands) and its rules
that loosen policy (`allow`) are ignored; rules that only tighten (`ask`, `deny`) and plain settings apply.
Editing the file changes its sha256 and so revokes trust until it is reviewed and trusted again.

Trust also covers what the hooks execute from the workspace (config/hook_files.py): the fingerprint of every file
under `.strata/` and of every file a hook command names, recorded at `strata trust` and checked before each run
of a hook. A changed file does not revoke the trust (the hooks would silently disappear, which lets through what
they block): the hooks stay, and each fails closed until the project is trusted again.

The record is `<home>/trusted_projects.json`, written atomically:

    {"version": 2,
     "projects": {"/abs/path/.strata/config.toml": {
         "sha256": "<hex>", "trusted_at": "2025-01-01T12:00:00Z",
         "files": {".strata/config.toml": "sha256:<hex>", ".strata/check.py": "sha256:<hex>"}}}}

Version 1 had no `files`; its entries are read as trusted configs whose hook files were never recorded, so their
hooks fail closed until `strata trust` is run again (the next write stores version 2).
"""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config._read import ConfigDoc, read_config_file
from config._trust_state import TrustState as TrustState  # the states on their own (config/_trust_state.py)
from config.hook_files import covered_files
from config.hook_spec import HOOK_EVENTS
from config.locations import project_config_path
from config.private_files import FILE_MODE, open_private, private_dir
from config.schema import ConfigFile
from core.errors import ConfigError, UsageError

TRUST_FILE = "trusted_projects.json"


class TrustRecord(BaseModel):
    """What `trust_project` recorded, with the validated content that was trusted."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: Path
    sha256: str
    trusted_at: datetime
    config: ConfigFile
    files: dict[str, str]
    """Workspace-relative path -> fingerprint of what the hooks may execute (config/hook_files.py)."""


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    trusted_at: datetime
    files: dict[str, str] | None = None
    """None in a version 1 record: the hook files were not recorded."""


class _Store(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    version: Literal[1, 2] = 2
    projects: dict[str, _Entry] = Field(default_factory=dict)


def trust_store_path(home: Path) -> Path:
    return home / TRUST_FILE


def trust_project(home: Path, workspace: Path, *, now: datetime | None = None) -> TrustRecord:
    """Validate the workspace's project file and record its sha256. A malformed file is refused (ConfigError)."""
    path = project_config_path(workspace)
    if not path.is_file():
        raise UsageError(f"no project config at {path}", hint="a project's config is its .strata/config.toml")
    doc: ConfigDoc = read_config_file(path)
    files = covered_files(workspace.expanduser().resolve(), hook_commands(doc.data))
    at = now or datetime.now(UTC)
    with _locked(home):
        store = _read(home)
        projects = dict(store.projects)
        projects[str(path)] = _Entry(sha256=doc.sha256, trusted_at=at, files=files)
        _write(home, _Store(projects=projects))
    return TrustRecord(path=path, sha256=doc.sha256, trusted_at=at, config=doc.data, files=files)


def hook_commands(data: ConfigFile) -> list[str]:
    """Every hook command of a config file, whatever its event."""
    return [h.command for event in HOOK_EVENTS for h in getattr(data.hooks, event)]


def untrust(home: Path, workspace: Path) -> bool:
    """Forget the workspace's project file. False when it was not trusted."""
    key = str(project_config_path(workspace))
    with _locked(home):
        store = _read(home)
        if key not in store.projects:
            return False
        _write(home, _Store(projects={k: v for k, v in store.projects.items() if k != key}))
    return True


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """One change of the record at a time across processes (an exclusive flock on a file beside it): two
    `strata trust` at once must not each write back a copy that lacks the other's project."""
    try:
        private_dir(home)
        fd = open_private(home / f".{TRUST_FILE}.lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot lock the trust record: {exc.strerror or exc}",
                          file=str(trust_store_path(home))) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def trust_state(home: Path, path: Path, sha256: str) -> TrustState:
    return lookup(home, path, sha256)[0]


def lookup(home: Path, path: Path, sha256: str) -> tuple[TrustState, dict[str, str] | None]:
    """The project file's trust state and, when trusted, the fingerprints recorded for its hook files (None when
    they were never recorded, or the file is not trusted)."""
    entry = _read(home).projects.get(str(path))
    if entry is None:
        return "untrusted", None
    if entry.sha256 != sha256:
        return "changed", None
    return "trusted", entry.files


def is_trusted(home: Path, path: Path, sha256: str) -> bool:
    return trust_state(home, path, sha256) == "trusted"


def trusted_projects(home: Path) -> dict[str, str]:
    """Project file path -> recorded sha256."""
    return {k: v.sha256 for k, v in _read(home).projects.items()}


def _read(home: Path) -> _Store:
    path = trust_store_path(home)
    hint = f"delete {path} and run `strata trust DIR` again for each project you trust"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return _Store()
    except OSError as exc:
        raise ConfigError(f"cannot read the trust record: {exc.strerror or exc}", file=str(path)) from None
    try:
        return _Store.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        reason = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"corrupt trust record: {reason}", file=str(path), hint=hint) from None


def _write(home: Path, store: _Store) -> None:
    """Write to a temporary file beside the record, fsync, then rename over it: readers see old or new, never half."""
    target = trust_store_path(home)
    body = json.dumps(store.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    import tempfile  # only when a project is trusted: kept off every command's start

    try:
        private_dir(home)
        fd, tmp = tempfile.mkstemp(dir=home, prefix=f".{TRUST_FILE}.", suffix=".tmp")
        try:
            os.fchmod(fd, FILE_MODE)  # 0600 whatever the umask: the record lands by rename with this mode
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(body)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dir_fd = os.open(home, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise ConfigError(f"cannot write the trust record: {exc.strerror or exc}", file=str(target)) from None
