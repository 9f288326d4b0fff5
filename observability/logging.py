"""structlog, configured by the entry surface in two steps. `configure_logging(verbose)` at start-up: stderr gets
warnings and errors, or readable lines of everything with `--verbose`. `attach_home(home, masker)` once the Strata
home and its masking key are known: JSON lines to `<home>/logs/strata.log` too, rotated by size.

Every event, the stdlib logging of libraries included, passes through the runtime's Masker before any sink sees
it, and carries the session, turn and call ids the runtime binds with structlog's contextvars. Logging never fails
its caller: an unwritable home leaves stderr only (with one warning), and so does a file that stops taking writes.

The setup is process-global because logging is (structlog's configuration and the stdlib root logger); `_active`
is the one handle on it, so configuring again replaces the handlers instead of stacking them."""

from __future__ import annotations

import fcntl
import logging
import logging.handlers
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from structlog.types import EventDict, Processor, WrappedLogger

from config.private_files import open_private, private_dir
from core.log_fields import FIELDS
from core.masking import Masker
from core.terminal_text import safe_text

LOG_DIR = "logs"
LOG_FILE = "strata.log"
MAX_BYTES = 5 * 1024 * 1024
BACKUPS = 3

_log = structlog.get_logger("strata.logging")


class _Masking:
    """Masks every string of an event (keys, values, nested ones); a value of any other type is first turned
    into its text, since its repr may hold a secret too. The masker is the runtime's once the home is known."""

    def __init__(self, masker: Masker) -> None:
        self.masker = masker

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        try:
            masked: dict[str, Any] = self.masker.mask_value(
                {k: _plain(v) for k, v in event.items() if not k.startswith("_")})
            return masked | {k: v for k, v in event.items() if k.startswith("_")}
        except Exception:  # never emit what could not be masked
            return {"event": "[log event dropped: it could not be masked]", "level": event.get("level", "error")}


def _record_fields(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """A plain logging record's fields (core/log_fields.py) as the event's own, as a structlog call's keywords are;
    before the masking, which masks them as it masks every field."""
    fields = getattr(event.get("_record"), FIELDS, None)
    if isinstance(fields, dict):
        event.update((str(k), v) for k, v in fields.items() if k not in event)
    return event


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return str(value)


class _Stderr(logging.Handler):
    """Writes to whatever `sys.stderr` is when the record comes (it is replaced under test runners). A terminal
    surface like any other: a record's text (a path, a config value, a model's words) is made inert
    (core/terminal_text.py); the log file keeps it as it was."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(safe_text(self.format(record)) + "\n")
            sys.stderr.flush()
        except Exception:
            pass  # nowhere left to say it


class _RotatingFile(logging.handlers.RotatingFileHandler):
    """The log file, created 0600, shared by every process of the home. The first failed write (disk full, home
    removed) turns the file off with one warning on stderr, instead of the stdlib's traceback per record.

    Several processes write and rotate the same `strata.log`. Each record is written under an exclusive flock on
    the log directory (which rotation never moves), and before writing, the file this process has open is checked
    against the one the path names now: when another process has rotated it away, this one reopens the path
    first. So a line never goes to a file that was renamed (and later deleted) by someone else's rotation, and
    two processes never rotate at once (the stdlib's exists-then-rename would collide). A record costs an flock
    and a stat more than a single process's log; records are few (no per-call info lines on the hot path)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.broken = False
        self._dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            super().__init__(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8",
                             errors="backslashreplace")
        except BaseException:
            os.close(self._dir_fd)
            raise

    def _open(self) -> Any:
        fd = open_private(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def emit(self, record: logging.LogRecord) -> None:
        if self.broken:
            return
        try:
            fcntl.flock(self._dir_fd, fcntl.LOCK_EX)
        except OSError:
            self.handleError(record)
            return
        try:
            self._follow_path()
            super().emit(record)
        except Exception:
            self.handleError(record)
        finally:
            fcntl.flock(self._dir_fd, fcntl.LOCK_UN)

    def _follow_path(self) -> None:
        """Reopen the path if another process rotated the file this one has open (under the lock)."""
        if self.stream is None:
            return
        try:
            now = os.stat(self.baseFilename)
        except FileNotFoundError:
            now = None
        mine = os.fstat(self.stream.fileno())
        if now is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            self.stream.close()
            self.stream = self._open()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._dir_fd >= 0:
                os.close(self._dir_fd)
                self._dir_fd = -1

    def handleError(self, record: logging.LogRecord) -> None:
        if self.broken:
            return
        self.broken = True
        error = sys.exc_info()[1]
        _log.warning("cannot write the log file; logging to stderr only", path=self.baseFilename, error=str(error))


@dataclass
class _Setup:
    """The logging this process configured, kept to undo it (`reset_logging`)."""

    masking: _Masking
    chain: list[Processor]
    console: _Stderr
    root_level: int
    """The root logger's level before; given back by `reset_logging`."""
    file: _RotatingFile | None = None
    warned: bool = False
    handlers: list[logging.Handler] = field(default_factory=list)


_active: _Setup | None = None


_CHATTY = ("aiosqlite", "asyncio", "asyncpg", "psycopg", "httpcore", "hpack")
"""Libraries whose debug records narrate their own internals (a database driver's every operation)."""


def _own_events(record: logging.LogRecord) -> bool:
    """On stderr: no debug chatter of a database driver or a transport (`_CHATTY`); their INFO and up, and every
    other logger's records (Strata's own events), pass."""
    if record.levelno >= logging.INFO:
        return True
    return not any(record.name == name or record.name.startswith(name + ".") for name in _CHATTY)


def configure_logging(verbose: bool = False) -> None:
    """Stderr only for now: readable lines of everything with `verbose`, warnings and errors otherwise. Events
    are masked with a masker of a random key until `attach_home` gives the runtime's."""
    reset_logging()
    global _active
    masking = _Masking(Masker.throwaway())
    chain: list[Processor] = [
        _record_fields,
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        masking,
    ]
    console = _Stderr(logging.DEBUG if verbose else logging.WARNING)
    console.addFilter(_own_events)  # --verbose shows Strata's events, not a driver's internals
    console.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    # plain, whether or not rich is installed (format_exc_info above already made exceptions text)
                    structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)],
        foreign_pre_chain=chain))
    level = logging.DEBUG if verbose else logging.INFO  # the file takes info and up even when stderr is quiet
    root = logging.getLogger()
    _active = _Setup(masking=masking, chain=chain, console=console, root_level=root.level, handlers=[console])
    root.setLevel(level)
    root.addHandler(console)
    structlog.configure(
        processors=[*chain, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,  # configuring again (tests, a second command in-process) takes effect
    )


def attach_home(home: Path, masker: Masker | None = None, *, max_bytes: int = MAX_BYTES,
                backups: int = BACKUPS, quiet: bool = False) -> Path | None:
    """Mask with `masker` from now on and write JSON lines to `<home>/logs/strata.log` too. Calling it again
    with the same home only swaps the masker. Returns the file, or None when logging stays on stderr (not
    configured, or the home cannot take the file: then one warning says so, unless `quiet`: a command that only
    reads, in a home it cannot write)."""
    setup = _active
    if setup is None:
        return None
    if masker is not None:
        setup.masking.masker = masker
    path = home / LOG_DIR / LOG_FILE
    if setup.file is not None and not setup.file.broken and setup.file.baseFilename == os.path.abspath(path):
        return path
    _drop_file(setup)
    try:
        private_dir(path.parent)
        handler = _RotatingFile(path, max_bytes, backups)
    except OSError as exc:
        if not setup.warned and not quiet:
            setup.warned = True
            _log.warning("cannot write the log file; logging to stderr only", path=str(path),
                         error=exc.strerror or str(exc))
        return None
    handler.setLevel(logging.NOTSET)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer(ensure_ascii=False)],
        foreign_pre_chain=setup.chain))
    logging.getLogger().addHandler(handler)
    setup.file = handler
    setup.handlers.append(handler)
    return path


def _drop_file(setup: _Setup) -> None:
    if setup.file is None:
        return
    logging.getLogger().removeHandler(setup.file)
    setup.handlers.remove(setup.file)
    setup.file.close()
    setup.file = None


def reset_logging() -> None:
    """Remove and close what `configure_logging` installed, and give structlog back its defaults."""
    global _active
    setup, _active = _active, None
    if setup is None:
        return
    root = logging.getLogger()
    for handler in setup.handlers:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(setup.root_level)
    structlog.reset_defaults()
