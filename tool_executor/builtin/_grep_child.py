"""The matching half of grep, run as its own process (`python -I -S -X utf8 _grep_child.py`).

Python's `re` can backtrack for longer than any deadline (`(a+)+$` over 34 a's and a `!` takes 2**34 steps) and
holds the interpreter's lock while it does, so matching in a thread would stall the whole runtime and could not be
stopped. In a process of its own it is killed at the call's deadline or on Ctrl-C. Standard library only, so it
starts in milliseconds.

It never outlives its use: on Linux it asks the kernel to kill it when the process that started it dies (a
SIGKILLed `strata` leaves no orphan spinning), and everywhere it sets an interval timer for the call's deadline,
whose default action ends the process even in the middle of a match (no Python code has to run for it).

Input (stdin): one JSON object `{"pattern", "max_matches", "max_file", "max_line", "deadline_s", "parent"}`, then
one JSON line per file:
`[path to open, name to show]` (the parent walked the workspace and applied the policy's path filter). Output
(stdout): one JSON line per matching line, `[name, line number, text]` (text cut at `max_line` characters), then
`{"done": {"large": n, "binary": n, "unreadable": n, "stopped": bool}}`."""

import contextlib
import ctypes
import json
import os
import re
import signal
import stat
import sys

_PR_SET_PDEATHSIG = 1


def _tie_to(parent: int, deadline_s: float) -> None:
    """Die with the parent (Linux) and at the deadline (the timer's SIGALRM is not handled, so it terminates)."""
    signal.setitimer(signal.ITIMER_REAL, deadline_s)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        sys.exit(1)


def _read(path: str, max_file: int, counts: dict[str, int | bool]) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        counts["unreadable"] += 1
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None  # swapped for a FIFO or a device since the walk: never read
        if info.st_size > max_file:
            counts["large"] += 1
            return None
        chunks, left = [], max_file + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError:
        counts["unreadable"] += 1
        return None
    finally:
        os.close(fd)
    if len(data) > max_file:
        counts["large"] += 1
        return None
    if b"\x00" in data[:4096]:
        counts["binary"] += 1
        return None
    return data


def main() -> None:
    header = json.loads(sys.stdin.readline())
    _tie_to(header["parent"], header["deadline_s"])
    regex = re.compile(header["pattern"])
    max_matches, max_line = header["max_matches"], header["max_line"]
    counts = {"large": 0, "binary": 0, "unreadable": 0, "stopped": False}
    found = 0
    out = sys.stdout
    for item in sys.stdin:
        path, name = json.loads(item)
        data = _read(path, header["max_file"], counts)
        if data is None:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                out.write(json.dumps([name, number, line[:max_line]]) + "\n")
                found += 1
                if found >= max_matches:
                    counts["stopped"] = True
                    out.write(json.dumps({"done": counts}) + "\n")
                    return
    out.write(json.dumps({"done": counts}) + "\n")


if __name__ == "__main__":
    main()
