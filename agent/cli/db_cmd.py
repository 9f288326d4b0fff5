"""`strata db copy --to TARGET`: move a home's sessions to another store, rows exactly as stored (memory/copy.py).

TARGET is a PostgreSQL URL, or the path of a SQLite database file (`HOME/strata.db` of another home). The source
is the store this command would use (`STRATA_DB`, or the home's `strata.db`). Both chains are keyed with the home's
`chain.key`: a SQLite target in a home without a key gets a copy of this home's key (0600), so its sessions verify
and continue there, and the secrets this home's sessions were seen to hold (`masking.seen`, 0600), so they are
masked there as here; a target home with another key is refused before anything is written. Every session is
checked before any is written (memory/copy.py), and a refused copy leaves the target as it found it (no database,
no key). Run it with the home at rest (no session running): a session written meanwhile is copied as it was when
it was read."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import click

from agent.cli._common import Command
from agent.cli.output import echo, echo_json
from config.chain_key import chain_key_path
from config.locations import expand_user
from config.private_files import private_dir
from config.seen_secrets import SEEN_FILE, carry_seen
from core.errors import ConfigError, StoreError, UsageError
from memory.copy import CopyReport, CopyTarget, copy_sessions
from memory.opening import open_store
from memory.store import EventStore


@click.group(name="db")
def db() -> None:
    """The event store: copy a home's sessions to another store."""


@db.command(name="copy")
@click.option("--to", "target", required=True, metavar="TARGET",
              help="postgresql://USER@HOST/DB, or the path of a SQLite strata.db (another home's).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session, then a summary.")
def copy(target: str, as_json: bool) -> None:
    """Copy every session of this home's store into TARGET, rows and hashes as they are. Sessions TARGET holds
    already are compared and skipped when identical, so a copy that stopped half-way can be run again."""
    cmd = Command()
    loaded = cmd.config(None)
    settings = loaded.settings

    wrote: list[str] = []

    def said(session_id: str, copied: bool) -> None:
        if copied:
            wrote.append(session_id)
        if as_json:
            echo_json({"type": "session", "session_id": session_id, "copied": copied})
        else:
            echo(f"{'copied' if copied else 'already there'}: {session_id}")

    async def main() -> CopyReport:
        source = await open_store(settings, read_only=True)
        try:
            fresh = None if is_url(target) else await anyio.to_thread.run_sync(_Fresh.before, target)
            # Refused before the clean-up below can run: what is there is the other copy's, and stays.
            held = None if is_url(target) else await anyio.to_thread.run_sync(_hold, target)
            try:
                return await _copy(source, target, settings.home, said)
            except BaseException:
                if fresh is not None and not wrote:  # refused before a session was written: leave nothing behind
                    await anyio.to_thread.run_sync(fresh.remove)
                raise
            finally:
                if held is not None:
                    os.close(held)
        finally:
            await source.close()

    report = cmd.run(main)
    if as_json:
        echo_json({"type": "copied", "copied": len(report.copied), "already": len(report.already)})
    else:
        echo(f"{len(report.copied)} session(s) copied, {len(report.already)} already there")


async def _copy(source: EventStore, target: str, home: Path, said: Callable[[str, bool], None]) -> CopyReport:
    into = await _open_target(target, home)
    try:
        if into.path == source.path:
            raise UsageError(f"{target} is the store this home uses already")
        report = await copy_sessions(source, into, on_session=said)
        if not is_url(target):
            await anyio.to_thread.run_sync(_carry_seen, home, Path(into.path).parent)
        return report
    finally:
        await into.close()


@dataclass
class _Fresh:
    """What a SQLite target lacked before the copy (the database's files, its home's chain key, the directories
    above it): removed again when the copy is refused before it wrote a session, so a refusal leaves the target
    as it found it (a key left there would bind the next database made there to this home's key)."""

    files: list[Path]
    dirs: list[Path]
    """Deepest first."""

    @classmethod
    def before(cls, target: str) -> _Fresh:
        path = _expanded(target).resolve()
        names = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
        files = [p for p in (*names, chain_key_path(path.parent)) if not os.path.lexists(p)]
        dirs: list[Path] = []
        probe = path.parent
        while not os.path.lexists(probe) and probe.parent != probe:
            dirs.append(probe)
            probe = probe.parent
        return cls(files, dirs)

    def remove(self) -> None:
        for path in self.files:
            with contextlib.suppress(OSError):
                path.unlink()
        for directory in self.dirs:
            with contextlib.suppress(OSError):  # not empty: something else is there now; it stays
                directory.rmdir()


def _hold(target: str) -> int | None:
    """Hold a SQLite target for the length of the copy (an exclusive flock on the database file, made 0600 if it
    is new; SQLite's own locks are fcntl locks, which flock leaves alone): a second `db copy` into it is refused
    before it writes, so it never takes the rows of the first, nor (refused later) removes the database the first
    is writing as one it made itself. None where the target is no file to hold (the store reports why)."""
    path = _expanded(target).resolve()
    if path.is_dir() or target.endswith(("/", os.sep)):
        return None  # refused by _sqlite_target
    try:
        private_dir(path.parent)
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreError(f"another `strata db copy` is writing into {path}; nothing was copied", path=str(path),
                         hint="run the copy again once it is done: sessions it copied are skipped") from None
    return fd


def _expanded(target: str) -> Path:
    try:
        return expand_user(target)
    except ConfigError as exc:  # `~name` of a user the system does not have
        raise UsageError(f"--to: {exc.message}") from None


def is_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def _carry_seen(home: Path, there: Path) -> None:
    """The target home masks the copied sessions as this one does: it gets the secrets they were seen to hold."""
    try:
        carry_seen(home, there)
    except OSError as exc:
        raise StoreError(f"cannot give {there} this home's seen secrets ({SEEN_FILE}): {exc.strerror or exc}",
                         path=str(there / SEEN_FILE), hint="the sessions were copied; run the copy again") from None


async def _open_target(target: str, home: Path) -> CopyTarget:
    if is_url(target):
        from memory.postgres import PostgresEventStore

        return await PostgresEventStore.open(target, home=home)
    path = await anyio.to_thread.run_sync(_sqlite_target, target, home)
    from memory import SqliteEventStore

    return await SqliteEventStore.open(path)


def _sqlite_target(target: str, home: Path) -> Path:
    """The SQLite target's path, its home given this home's chain key if it has none."""
    path = _expanded(target).resolve()
    if path.is_dir():
        raise UsageError(f"{path} is a directory: name the database file (e.g. {path / 'strata.db'})")
    if target.endswith(("/", os.sep)):  # a directory not made yet: a file of its name would put the key above it
        raise UsageError(f"{path}/ names a directory: name the database file (e.g. {path / 'strata.db'})")
    here, there = chain_key_path(home), chain_key_path(path.parent)
    if not there.exists() and here.exists():
        try:
            private_dir(path.parent)
            fd = os.open(there, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(here.read_bytes())
        except OSError as exc:
            raise StoreError(f"cannot give {path.parent} this home's chain key: {exc.strerror or exc}",
                             path=str(path)) from None
    return path
