"""The environment block a process started with, as the kernel shows it (/proc/PID/environ, `ps e`): removing a
variable from os.environ (unsetenv) keeps it from the processes started after, but leaves its value in that block
for the process's whole life. `blank_initial_value` overwrites it there, for a secret the process read once."""

from __future__ import annotations

import ctypes


def blank_initial_value(name: str) -> None:
    """Overwrite with NULs the value of `name` in the environment block this process started with. Linux only; a
    no-op elsewhere, when the variable was not in that block, or when the block cannot be found as the kernel
    reports it. Call it once the variable is removed from os.environ (nothing points into the block for it then)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        with open("/proc/self/environ", "rb") as environ:
            block = environ.read()
        start = int(fields[47])  # env_start: field 50 of proc(5), fields[0] being field 3
    except (OSError, IndexError, ValueError):
        return
    if not start or not block or ctypes.string_at(start, len(block)) != block:
        return
    prefix = name.encode() + b"="
    offset = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefix):
            ctypes.memset(start + offset + len(prefix), 0, len(entry) - len(prefix))
        offset += len(entry) + 1
