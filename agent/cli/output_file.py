"""Writing a command's output to a path the user named (`strata export --output PATH`).

What the path names decides how it is written, so that nothing is replaced that should not be:

- a regular file (or nothing yet): written atomically, a temporary file beside it renamed over it, so a reader
  never sees half an export and a failure leaves the old file as it was; a file replaced keeps its permission
  bits (a new file is 0600, as `mkstemp` makes it);
- a symlink is followed deliberately: its final target is what gets written (atomically if it is a regular file
  or does not exist yet), and the link stays a link;
- a path through `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/PID/fd/N` names a file this process already
  has open (a pipe, a terminal, the file a shell redirected stdout to): it is written in place and appended to,
  as the shell set it up (`>> FILE` keeps what FILE held);
- anything else that is not a regular file (a device such as /dev/full, a FIFO, a terminal) is opened and written
  in place, never replaced.

A failed write (ENOSPC on /dev/full, EPIPE on a FIFO whose reader left) is a `StrataError`: one line, exit 1; when
the temporary file cannot be made, the line names the directory and why (missing, not a directory, or one that
takes no new file, as /proc or a read-only mount), not the file. The
export command refuses, before writing, a path that leads to one of the Strata home's own files (`refuse_home_file`:
`-o strata.db` run in the home would replace the event store with the export)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from config.chain_key import KEY_FILE as CHAIN_KEY_FILE
from config.checked import CHECKED_FILE
from config.masking_key import KEY_FILE as MASKING_KEY_FILE
from config.seen_secrets import SEEN_FILE
from core.errors import StrataError
from core.record import record

_FD_ALIAS = re.compile(r"/dev/(stdout|stderr|stdin|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")
_MAX_LINKS = 40  # as the kernel's limit on symlinks followed in one lookup


@record
class Written:
    path: Path
    """What was written: the target a symlink led to, or the path itself."""
    made_file: bool
    """A regular file was written (so printing its path helps); False for a stream written in place."""


def write_output(path: Path, text: str) -> Written:
    """Write `text` where `path` leads (see the module docstring). Errors name the path as given, or the target
    a symlink led to."""
    absolute = Path(os.path.abspath(path))
    target, through_fd = _follow(absolute)
    if through_fd:
        return _in_place(path, text, append=True)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError as exc:  # the path goes on through a file: its directory is not one
        raise _directory_error(path, target.parent, exc) from None
    except OSError as exc:
        raise _error(path, exc) from None
    if mode is not None and not stat.S_ISREG(mode):
        return _in_place(path, text, append=False)
    _atomic(target, text, shown=path if target == absolute else target)
    return Written(target, made_file=True)


HOME_FILES = frozenset({"strata.db", "strata.db-wal", "strata.db-shm", "strata.db-journal", CHAIN_KEY_FILE,
                        MASKING_KEY_FILE, SEEN_FILE, CHECKED_FILE, "trusted_projects.json",
                        ".trusted_projects.json.lock", "chat_history"})
"""The files at the top of a Strata home that are its own (the README's "Files" list); what lies in a directory
of the home (ledger/, logs/, locks/, knowledge-index/) is the home's too."""


def refuse_home_file(path: Path, home: Path) -> None:
    """A StrataError when `path` leads (through symlinks) to one of the Strata home's own files: an export written
    there would replace the event store, a key or the ledger with itself."""
    real, real_home = Path(os.path.realpath(os.path.abspath(path))), Path(os.path.realpath(home))
    if not real.is_relative_to(real_home) or real == real_home:
        return
    inside = real.relative_to(real_home)
    if len(inside.parts) > 1 or inside.name in HOME_FILES:
        raise StrataError(f"{path} is a file of the Strata home ({real_home}): an export is never written over "
                          "the home's own files (its event store, keys, ledger, logs)",
                          hint="name a file outside the Strata home")


def _follow(path: Path) -> tuple[Path, bool]:
    """The path a chain of symlinks ends at, and whether the chain passes through a file descriptor alias (whose
    own target, say `pipe:[1234]`, is not a path to follow)."""
    for _ in range(_MAX_LINKS):
        if _FD_ALIAS.fullmatch(str(path)):
            return path, True
        try:
            link = os.readlink(path)
        except OSError:  # not a link, or not there: the chain ends here
            return path, False
        path = Path(os.path.normpath(os.path.join(os.path.realpath(path.parent), link)))
    return path, False  # a loop: opening it reports ELOOP


def _in_place(path: Path, text: str, *, append: bool) -> Written:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()  # what this process printed before comes first, if the path leads to its own stdout
    flags = os.O_WRONLY | os.O_NOCTTY | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _error(path, exc) from None
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise _error(path, exc) from None
    finally:
        os.close(fd)
    return Written(path, made_file=False)


def _atomic(path: Path, text: str, *, shown: Path) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _directory_error(shown, path.parent, exc) from None
    try:
        with contextlib.suppress(FileNotFoundError):  # a file replaced keeps its permissions (a new one: 0600)
            os.fchmod(fd, stat.S_IMODE(os.stat(path).st_mode))
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _error(shown, exc) from None


def _error(path: Path, exc: OSError) -> StrataError:
    return StrataError(f"cannot write {path}: {exc.strerror or exc}")


def _directory_error(shown: Path, directory: Path, exc: OSError) -> StrataError:
    """`shown` cannot be written for its directory's sake, not the file's: the directory is missing, is not one, or
    takes no new file for the temporary one (procfs answers ENOENT for a file that exists; a read-only directory
    EACCES or EROFS for a file that may well be writable)."""
    why = exc.strerror or str(exc)
    there = directory  # the nearest part of the path that exists
    while not os.path.lexists(there) and there != there.parent:
        there = there.parent
    if os.path.islink(there) and not os.path.exists(there):
        return StrataError(f"cannot write {shown}: {there} is a link to {os.readlink(there)}, which does not exist "
                           f"({why})", hint="create what the link names, or name a file in a directory that exists")
    if not os.path.isdir(there):
        return StrataError(f"cannot write {shown}: {there} is not a directory ({why})",
                           hint="name a file in a directory")
    if there != directory:
        return StrataError(f"cannot write {shown}: its directory {directory} does not exist ({why})",
                           hint="create the directory first, or name a file in one that exists")
    return StrataError(f"cannot write {shown}: its directory {directory} cannot take a new file ({why}); the "
                       "output goes to a temporary file there first, then is renamed into place",
                       hint="name a file in a directory you can create files in, or write to standard output "
                            "(leave out --output) and redirect it")
