"""What `strata serve` without `--foreground` means: the daemon detaches from the terminal and the command returns
once it listens (or says why it could not).

The classic double fork: the command forks, the child starts a new session (no controlling terminal) and forks
again, and the grandchild (never a session leader, so it can never acquire a terminal) is the daemon. It works in
`/`, takes no input, and writes what it would print to `<home>/logs/serve.out` (its structured log goes to
`<home>/logs/strata.log` as every command's does). A pipe carries one JSON line from the daemon back to the
command: where it listens, or the error that stopped it (its line, hint and exit code), so `strata serve` reports
either exactly as `--foreground` would; a daemon that dies before it says anything closes the pipe, and the
command says so. Fork only before any thread or event loop exists (the CLI calls this first)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from config.private_files import open_private, private_dir
from core.errors import StrataError
from core.record import record

OUT_FILE = "serve.out"


@record
class Started:
    """What the command learns in the terminal: the daemon's pid and socket, or why it did not start."""

    pid: int | None = None
    socket: str | None = None
    message: str | None = None
    hint: str | None = None
    exit_code: int = 0


class Readiness:
    """The daemon's end of the pipe: say once that it listens, or why it stopped."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def ready(self, socket: Path) -> None:
        self._say({"pid": os.getpid(), "socket": str(socket)})

    def failed(self, err: StrataError, message: str, hint: str | None) -> None:
        self._say({"message": message, "hint": hint, "exit_code": err.exit_code})

    def _say(self, obj: dict[str, object]) -> None:
        if self._fd < 0:
            return
        try:
            os.write(self._fd, json.dumps(obj).encode() + b"\n")
        except OSError:
            pass  # the command went away: nothing to tell
        finally:
            os.close(self._fd)
            self._fd = -1


def daemonize(home: Path) -> Readiness | Started:
    """Fork the daemon. In the daemon: its Readiness. In the command: what the daemon said (or that it died)."""
    logs = home / "logs"
    private_dir(logs)
    out = open_private(logs / OUT_FILE, os.O_WRONLY | os.O_APPEND)
    r, w = os.pipe()
    pid = os.fork()
    if pid > 0:  # the command
        os.close(w)
        os.close(out)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        return _started(data, logs / OUT_FILE)
    try:  # the first child: a new session, then the daemon is its child, and it leaves
        os.close(r)
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        os.chdir("/")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(devnull)
        os.close(out)
    except BaseException:
        os._exit(1)
    return Readiness(w)


def _started(data: bytes, out: Path) -> Started:
    try:
        said = json.loads(data)
    except ValueError:
        return Started(message="the daemon stopped before it was listening", hint=f"see {out} and the home's "
                       "log (logs/strata.log)", exit_code=1)
    if "pid" in said:
        return Started(pid=said["pid"], socket=said["socket"])
    return Started(message=said["message"], hint=said.get("hint"), exit_code=int(said.get("exit_code", 1)))
