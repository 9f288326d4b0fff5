"""Helpers for tests about the process groups of `bash` calls: is a group still running (zombies do not count,
since the machine's init may reap them late), wait for a file a command writes, end a group a test left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def group_members(pgid: int) -> list[int]:
    """Pids of the processes in group `pgid` that are not zombies."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def wait_group_gone(pgid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def kill_group(pgid: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)


def wait_for(path: Path, proc: subprocess.Popen[str] | None = None, *, lines: int = 1, timeout: float = 30) -> None:
    """Until `path` holds at least `lines` lines (the process, if given, must still run meanwhile)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and len(path.read_text().splitlines()) >= lines):
        if proc is not None and proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"the process ended early ({proc.returncode}): {err}")
        assert time.monotonic() < deadline, f"{path} never got {lines} line(s)"
        time.sleep(0.02)


def finish(proc: subprocess.Popen[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Wait for `proc` (killed if it overstays) and collect its output."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)  # faulthandler (PYTHONFAULTHANDLER, tests/conftest.py) prints the stacks
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        raise AssertionError(f"{proc.args} did not end within {timeout} s; stderr: {err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
