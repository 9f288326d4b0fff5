"""What /proc says of a process (Linux): its kernel start time, this boot's id, its PID namespace, whether it is a
zombie. Where /proc is missing, the start time, boot and namespace are '' (core/processes.py says how leases and
recorded commands use them). Standard library only, so a command that only reads can check a lease cheaply."""

from __future__ import annotations

import os
from pathlib import Path


def process_start(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot), or '' where /proc is not available."""
    stat = proc_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else ""


def boot_id() -> str:
    """This boot's random id (the kernel makes a new one at every boot), or ''."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's PID namespace, e.g. `pid:[4026531836]`, or ''."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def proc_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state first), or None. The command name (field 2) may hold spaces and
    parentheses: the split starts after its closing parenthesis."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def is_zombie(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[0] in ("Z", "X")
