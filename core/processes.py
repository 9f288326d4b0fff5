"""Who a process is, in a way that survives the process that recorded it: pid and process group, the kernel's
start time of the group leader (so a recycled pid is not mistaken for it), the boot it ran in (a reboot ends
every process) and its PID namespace (a pid means something only inside its own namespace). Leases identify
their owner this way, and a command that may outlive Strata is recorded this way so that a later process can
tell whether it still runs.

Reads /proc (Linux). Where /proc is missing, the start time, boot and namespace are '' and checks fall back to
what `kill(pid, 0)` can tell."""

import contextlib
import os
import signal
import socket
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.process_facts import boot_id as boot_id
from core.process_facts import is_zombie as is_zombie
from core.process_facts import pid_namespace as pid_namespace
from core.process_facts import proc_stat
from core.process_facts import process_start as process_start

GroupState = Literal["running", "gone", "unseen"]
"""`running`: some process of the group is alive (zombies do not count); `gone`: none is; `unseen`: it cannot be
checked from here (another host, or another PID namespace)."""


class ProcessGroup(BaseModel):
    """A process group as recorded when its leader started. `pgid` is the leader's pid (a group made with
    `setsid`), `start` the leader's start time."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    pid: int
    pgid: int
    start: str
    boot_id: str
    pid_ns: str
    host: str

    @classmethod
    def of_leader(cls, pid: int) -> "ProcessGroup":
        """The group led by `pid`, a child this process just started in a new session (so the pid cannot have
        been recycled yet: it is not reaped)."""
        return cls(pid=pid, pgid=pid, start=process_start(pid), boot_id=boot_id(), pid_ns=pid_namespace(),
                   host=socket.gethostname())

    def describe(self) -> str:
        return f"process group {self.pgid}"

    def state(self) -> GroupState:
        if self.host != socket.gethostname() or (self.pid_ns and self.pid_ns != pid_namespace()):
            return "unseen"
        if self.boot_id and self.boot_id != boot_id():
            return "gone"  # same host name, another boot: the machine restarted since, and the group with it
        leader = process_start(self.pgid)
        if leader and self.start and leader != self.start:
            return "gone"  # the id now belongs to another process: the group ended and its id was reused
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "running"
        return "running" if self._live_members() else "gone"

    def _live_members(self) -> bool:
        """Whether a process of the group is alive and not a zombie (init may reap late). Without /proc, what
        `killpg` said stands."""
        try:
            entries = os.listdir("/proc")
        except OSError:
            return True
        for entry in entries:
            if entry.isdigit():
                stat = proc_stat(int(entry))
                if stat is not None and len(stat) > 2 and stat[2] == str(self.pgid) and stat[0] not in ("Z", "X"):
                    return True
        return False

    def kill(self) -> None:
        """SIGKILL every process of the group, if it is still this group."""
        if self.state() == "running":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
