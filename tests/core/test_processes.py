"""Process identity (core/processes.py) with real processes: a recorded group is `running` while any of its
processes lives, `gone` once they are dead (zombies do not count) or when its id now names another process, and
`unseen` where it cannot be checked (another host or PID namespace)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from core.processes import ProcessGroup, boot_id, is_zombie, pid_namespace, process_start


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    """A shell in its own session whose background child outlives it: a group whose leader may be gone."""
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        # The background `sleep` must exist before a test kills the leader (a loaded machine may not have forked
        # it yet, and the group would then die with its leader).
        assert _until(lambda: _members(proc.pid) > 1), "the group's background sleep never started"
        yield proc
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _members(pgid: int) -> int:
    """Live processes of a process group, from /proc."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    count += 1
    return count


def _until(check: object, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_group_runs_until_all_its_processes_are_dead(group: subprocess.Popen[bytes]) -> None:
    """Recorded at start: running; its leader's start time, boot and namespace are this machine's."""
    recorded = ProcessGroup.of_leader(group.pid)
    assert recorded.start == process_start(group.pid) != ""
    assert (recorded.boot_id, recorded.pid_ns) == (boot_id(), pid_namespace())
    assert recorded.state() == "running"
    recorded.kill()
    assert _until(lambda: recorded.state() == "gone")


def test_a_group_whose_leader_died_runs_while_a_member_lives(group: subprocess.Popen[bytes]) -> None:
    """The leader is killed alone (a zombie, not reaped yet): the group still runs through its `sleep`."""
    recorded = ProcessGroup.of_leader(group.pid)
    os.kill(group.pid, signal.SIGKILL)
    assert _until(lambda: is_zombie(group.pid))
    assert recorded.state() == "running"  # the sleep in the background
    os.killpg(group.pid, signal.SIGKILL)
    assert _until(lambda: recorded.state() == "gone")  # the leader is still an unreaped zombie: not counted


def test_a_recycled_id_or_another_boot_is_gone_another_namespace_or_host_is_unseen(
        group: subprocess.Popen[bytes]) -> None:
    """The id of a live group with another start time is a different group; another boot ended it; a record from
    another PID namespace or host cannot be checked here."""
    recorded = ProcessGroup.of_leader(group.pid)
    assert recorded.model_copy(update={"start": "1"}).state() == "gone"
    assert recorded.model_copy(update={"boot_id": "another-boot"}).state() == "gone"
    assert recorded.model_copy(update={"pid_ns": "pid:[1]"}).state() == "unseen"
    assert recorded.model_copy(update={"host": "elsewhere"}).state() == "unseen"
    recorded.model_copy(update={"start": "1"}).kill()  # never kills what it does not recognise
    assert recorded.state() == "running"
