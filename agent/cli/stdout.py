"""Standard output that cannot break a command.

Whatever a command prints (click, rich, the chat terminal) goes through `sys.stdout`. `install()` replaces it with
an ordinary text stream over a raw layer that writes file descriptor 1 and never raises: the first failed write
(the reader of a pipe went away: EPIPE; a full disk or /dev/full: ENOSPC; EIO) is remembered, fd 1 is pointed at
/dev/null, and later output is dropped. So a session that prints its events is never cut short, half a batch in,
because its output cannot be written; it runs to its end, and `finish()` says what happened to the output:

- the reader stopped reading (`strata ... | head`): nothing is said and the exit status is the command's own.
  The reader chose to stop; the command did what it was asked;
- any other failure: one error line on stderr and exit 1 (an outcome status 0, 3, 4 or 5 becomes 1, since the
  output that carried it is incomplete; an error status stays).

Commands that would print for ever (`timeline --follow`) ask `output_lost()` and stop."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import select
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from agent.outcome import EXIT_ERROR

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

_OUTCOMES = frozenset({0, 3, 4, 5})
"""Exit statuses that report how a command ended rather than an error (see agent/outcome.py)."""


class _Fd1(io.RawIOBase):
    """File descriptor 1, writes only; a failure is recorded, never raised."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.failure: OSError | None = None
        self._tty: bool | None = None
        """Whether fd 1 is a terminal, asked once: click asks before every line it prints (an `ioctl` each,
        which a long run of printed events paid per line), and what fd 1 leads to does not change under a running
        command except by `_lost`, after which the answer is False anyway."""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        if self.failure is not None:
            return False
        if self._tty is None:
            self._tty = os.isatty(self._fd)
        return self._tty

    def write(self, data: Buffer, /) -> int:
        view = memoryview(data).cast("B")
        size = len(view)  # in bytes, as a raw write counts
        if self.failure is not None:
            return size
        while view:
            try:
                n = os.write(self._fd, view)
            except BlockingIOError:  # a non-blocking descriptor (set by another program): wait until it drains
                select.select([], [self._fd], [])
                continue
            except OSError as exc:
                self._lost(exc)
                return size
            view = view[n:]
        return size

    def _lost(self, exc: OSError) -> None:
        self.failure = exc
        # Later writes to fd 1 by anything else (the interpreter's last flush at exit included) go nowhere
        # instead of failing again.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._fd)
            os.close(devnull)


def install() -> None:
    """Route `sys.stdout` through `_Fd1`, keeping its encoding, error handling and buffering."""
    current = sys.stdout
    if not isinstance(current, io.TextIOWrapper) or _raw() is not None:  # None, or a test runner's capture
        return
    try:
        fd = current.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (a test runner's capture): left alone
        return
    with contextlib.suppress(OSError):
        current.flush()
    stream = io.TextIOWrapper(io.BufferedWriter(_Fd1(fd)), encoding=current.encoding, errors=current.errors,
                              line_buffering=current.line_buffering, write_through=current.write_through)
    sys.stdout = stream


def _raw() -> _Fd1 | None:
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    return raw if isinstance(raw, _Fd1) else None


def output_lost() -> bool:
    """Whether standard output failed (so printing more is pointless)."""
    raw = _raw()
    if raw is not None and raw.failure is None:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
    return raw is not None and raw.failure is not None


def finish(code: int, say: Callable[[str], None]) -> int:
    """Flush, and the exit status given what happened to the output (see the module docstring)."""
    raw = _raw()
    if raw is None:
        return code
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    failure = raw.failure
    if failure is None or failure.errno == errno.EPIPE:
        return code
    reason = failure.strerror or str(failure)
    say(f"strata: error: cannot write to standard output: {reason}; the output is incomplete")
    say("hint: the command itself ran to its end; only what it printed is incomplete (a session it drove is "
        "recorded: strata sessions)")
    return EXIT_ERROR if code in _OUTCOMES else code
