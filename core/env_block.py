"""The environment block a process started with, as the kernel shows it (/proc/PID/environ, `ps e`): removing a
variable from os.environ (unsetenv) keeps it from the processes started after, but leaves its value in that block
for the process's whole life. `blank_initial_value` overwrites it there, for a secret the process read once.
`take_secret` does both for a secret Strata itself uses (the model's API key) and keeps the value for the process's
later readers."""

from __future__ import annotations

import os

_taken: dict[str, str] = {}


def blank_initial_value(name: str) -> None:
    """Overwrite with NULs the value of `name` in the environment block this process started with. Linux only; a
    no-op elsewhere, when the variable was not in that block, or when the block cannot be found as the kernel
    reports it. Call it once the variable is removed from os.environ (nothing points into the block for it then)."""
    import ctypes  # only a process that holds such a secret pays for it

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


def take_secret(name: str) -> str | None:
    """The value of the secret environment variable `name`, taken out of this process's environment: removed from
    os.environ (no process started later inherits it) and blanked in the startup block (`blank_initial_value`),
    the value kept here for this process's later readers, who call this again. A value set in os.environ since
    (an embedding program's) is taken in its turn and replaces the kept one. None when it was never set."""
    value = os.environ.pop(name, None)
    if value is not None:
        blank_initial_value(name)
        _taken[name] = value
    return _taken.get(name)


def taken_secrets() -> list[str]:
    """Every value `take_secret` holds: still secrets to mask wherever they show, though no longer in os.environ."""
    return list(_taken.values())
