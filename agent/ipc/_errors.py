"""What a user of the IPC layer can meet: one line and a hint each (core/errors.py `StrataError`).

    StrataError
    ├── DaemonRunning (exit 2)   `serve`: a daemon already holds this home's lock (names its pid)
    ├── SocketUnusable (exit 2)  `serve`: the socket path is taken by something else, too long, or its
    │                            directory is open to other users
    ├── ListenerFailed (exit 1)  `serve`: the listening socket failed while it served (it drained and stopped)
    ├── LockUnusable (exit 2)    any daemon command: the home's daemon lock cannot be opened (the home is not a
    │                            directory, or not this user's to read or write)
    ├── NoDaemon                 a client: nothing listens at the socket
    ├── PeerRefused              a client: the daemon (or the socket's permissions) refused this user
    │   └── ForeignListener      a client: what listens at the socket runs as another user (nothing sent)
    ├── VersionRefused           a client: the daemon does not speak this client's protocol version
    ├── DaemonGone               a client: the connection ended before the reply (the daemon stopped, or
    │                            closed this connection for misbehaving)
    └── RequestFailed            a client: the daemon answered `error` (typed `code`)
"""

from __future__ import annotations

from core.errors import StrataError


class DaemonRunning(StrataError):
    exit_code = 2

    def __init__(self, pid: int | None, socket: str | None, lock: str) -> None:
        who = f"pid {pid}" if pid is not None else "pid not yet written"
        where = f", socket {socket}" if socket else ""
        super().__init__(f"a Strata daemon is already running for this home ({who}{where})",
                         hint=f"stop it first (kill -TERM {pid})" if pid is not None else f"its lock: {lock}")
        self.pid = pid
        self.socket = socket


class SocketUnusable(StrataError):
    exit_code = 2

    def __init__(self, path: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"cannot listen at {path}: {reason}", hint=hint)
        self.path = path
        self.reason = reason


class ListenerFailed(StrataError):
    """The listening socket failed for good while the daemon served: it accepts nobody, so the daemon drains and
    exits non-zero, for a supervisor to start it again."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"the daemon's socket {path} failed: {reason}; the daemon drained and stopped",
                         hint="start it again (`strata serve`); its sessions are resumable")
        self.path = path
        self.reason = reason


class LockUnusable(StrataError):
    exit_code = 2

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot use the daemon lock {path}: {reason}",
                         hint="STRATA_HOME must be a directory this user may read and write")
        self.path = path


class NoDaemon(StrataError):
    def __init__(self, path: str, reason: str = "nothing is listening there") -> None:
        super().__init__(f"no Strata daemon at {path}: {reason}", hint="start one with `strata serve`")
        self.path = path


class PeerRefused(StrataError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"the Strata daemon at {path} refused this connection: {reason}",
                         hint="a daemon serves only the user it runs as")
        self.path = path


class ForeignListener(PeerRefused):
    """The client's own check: what listens at the socket runs as another user, so nothing is sent to it."""

    def __init__(self, path: str, uid: int | None) -> None:
        StrataError.__init__(self, f"not talking to {path}: the process listening there runs as another user (uid "
                             f"{'unknown' if uid is None else uid}); nothing was sent to it",
                             hint="a daemon serves only the user it runs as; check the --socket path")
        self.path = path


class VersionRefused(StrataError):
    def __init__(self, path: str, mine: int, theirs: tuple[int, ...]) -> None:
        spoken = ", ".join(str(v) for v in theirs) or "none"
        super().__init__(f"the Strata daemon at {path} speaks protocol version {spoken}, this client {mine}",
                         hint="use a client from the same Strata version as the daemon")
        self.versions = theirs


class DaemonGone(StrataError):
    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"the connection to the Strata daemon at {path} ended{': ' + detail if detail else ''}")
        self.path = path


class RequestFailed(StrataError):
    def __init__(self, code: str, message: str, request_id: str | None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.request_id = request_id
