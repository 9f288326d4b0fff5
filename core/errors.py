"""Strata's error tree. Every error a user can meet is one of these, carries typed fields, and renders as one
clear line plus an optional hint (never a traceback).

    StrataError                      base: .message, .hint, .exit_code (.head, .listing: an error listing lines)
    ├── misuse (exit 2)
    │   ├── UsageError               a bad command line or argument
    │   │   └── ProjectHooksMissing  a resume would lose the trusted project hooks its session started with
    │   ├── ConfigError              a bad setting: file, key, reason
    │   └── ScriptError              a malformed scripted-model file (path, entry, reason)
    ├── run failures (exit 1)
    │   ├── StoreError               the database cannot be used (corrupt, locked, missing, unwritable)
    │   │   ├── PersistError         a commit failed; nothing that depended on it ran
    │   │   │   ├── UnstorableEvent  an event would not read back as written; nothing of the commit was kept
    │   │   │   └── LeaseGone        the writer's lease is no longer its own; nothing of the commit was kept
    │   │   ├── DamagedRecord        a stored record of a session does not read back (edited outside Strata)
    │   │   │   ├── DamagedEvent     a stored event does not load (a log edited or damaged outside Strata)
    │   │   │   └── DamagedRow       a stored timeline row does not read back as the row type allows
    │   │   └── DamagedSession       a stored session row does not read back as a session
    │   ├── InconsistentLog          a session's events load but break the state machine (fold rejects them)
    │   ├── SessionNotFound          no session with that id
    │   ├── SessionActive            another live process holds the session's lease
    │   ├── LeaseLost                another process took the session's lease while this one drove it
    │   ├── ReceiptError             a receipt cannot be reconciled as asked
    │   └── ModelError               the model path failed (retryable or not)
    ├── OrphanRunning (exit 6)       a command whose Strata process died still runs; nothing runs beside it
    ├── Stopped (exit 128 + N)       a termination signal (SIGTERM, SIGHUP) stopped the command, like Ctrl-C
    └── the serve daemon's, defined beside the code that raises them (the layers above core)
        ├── HostRefused (exit 2)     a UsageError: the session host will not do what a client asked
        │                            (agent/daemon/_errors.py)
        └── DaemonRunning, SocketUnusable (exit 2), NoDaemon, PeerRefused, VersionRefused, DaemonGone,
            RequestFailed            the IPC layer's, client and server side (agent/ipc/_errors.py)

Other exceptions are internal signals, each caught where it is raised and turned into one of the above, a call's
result or a note; none reaches a user as itself: `FoldError` (becomes InconsistentLog), `SnapshotError` (the log
is folded instead), `TooDeep` (a ScriptError, or a model failure as `StreamIncomplete` and `BadToolInput` are),
`FrontMatterError` (a corpus problem), `TooMuch` (a hook-file problem), `OutsideWorkspace` (a scope denial),
`ToolError` and `ToolTimeout` (a tool's error result), `core.tools.Stopped` (a worker thread told to give up),
`LockTimeout` and `HookFailed` (a call's result), and the private ones of a single module. `ValueError` is raised
for a programming error (a bad argument) and by pydantic validators, which report it as a ConfigError or a
validation error of the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol


class StrataError(Exception):
    """Base of every error Strata reports to a user."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None, listing: Sequence[str] = ()) -> None:
        """`listing`: lines shown under the message, one each (the candidates an ambiguous id names); `message`
        then holds them too, indented on lines of their own, for a reader other than the command line's error
        line (agent/cli/output.py say_error), which shows `head` and each line with its line breaks escaped."""
        self.head = message
        self.listing = tuple(listing)
        message += "".join(f"\n  {line}" for line in self.listing)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(StrataError):
    exit_code = 2


class ProjectHooksMissing(UsageError):
    """A session started with a trusted project's hooks would resume without them (they would be ignored, or
    refuse to run): refused, fail closed, until the person trusts the project again or says to go on without."""

    def __init__(self, message: str, *, session_id: str, project_file: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.session_id = session_id
        self.project_file = project_file


class ConfigError(StrataError):
    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None,
                 hint: str | None = None) -> None:
        where = ", ".join(p for p in (file and f"file {file}", key and f"key {key}") if p)
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.file = file
        self.key = key


class ScriptError(StrataError):
    exit_code = 2

    def __init__(self, path: str, reason: str, *, entry: str | None = None) -> None:
        where = f"{path}" + (f" at {entry}" if entry else "")
        super().__init__(f"invalid model script {where}: {reason}",
                         hint="a script is a JSON list of assistant turns, each a list of content blocks")
        self.path = path
        self.entry = entry
        self.reason = reason


class StoreError(StrataError):
    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


class PersistError(StoreError):
    """A durable commit failed. Whatever waited on that commit (a tool dispatch) did not start."""

    def __init__(self, message: str, *, session_id: str | None = None, path: str | None = None,
                 hint: str | None = None) -> None:
        resume = f"`strata resume {session_id}`" if session_id else "resume the session (`strata sessions` lists it)"
        super().__init__(message, path=path, hint=hint or f"no tool ran after the failed commit; fix the database "
                                                          f"and {resume}")
        self.session_id = session_id


class LeaseGone(PersistError):
    """A commit made under a lease (`Write.lease_token`) found another token holding the session's lease: another
    process took the session over (the lease expired unrenewed while this one was stopped or cut off), so the
    whole commit is refused and nothing that waited on it runs. The driver reports it as LeaseLost."""

    def __init__(self, session_id: str, *, path: str | None = None) -> None:
        super().__init__(f"commit refused: session {session_id}'s lease is no longer this process's (another "
                         "process took the session over); nothing of this commit was written",
                         session_id=session_id, path=path,
                         hint=f"no tool ran after the refused commit; `strata show {session_id}` shows where the "
                              "session stands")


class UnstorableEvent(PersistError):
    """An event whose JSON would not read back as an event (text that is not UTF-8, nesting past what the decoder
    reads): committing it would leave a log that no `fold` can open again, so the whole commit is refused."""

    def __init__(self, kind: str, reason: str, *, session_id: str | None = None, path: str | None = None) -> None:
        reason = " ".join(reason.split())
        super().__init__(f"commit refused: a {kind} event would not read back as written ({reason}); nothing of "
                         "this commit was written", session_id=session_id, path=path,
                         hint="no tool ran after the refused commit; this is a bug in what produced the event: "
                              "report it with the command you ran")
        self.kind = kind
        self.reason = reason


class DamagedRecord(StoreError):
    """A stored record of a session (an event of its log, a row of its timeline) that does not read back as its type
    allows: the database was edited or damaged outside Strata. Reported as one line naming the session, the
    record's seq and what is wrong; never repaired or skipped. A subclass says which record it is."""

    record: ClassVar[str]  # what of the session is damaged: "log", "timeline"
    item: ClassVar[str]  # one record of it: "event", "row"
    fails: ClassVar[str]  # what the damaged record does not do: "does not load"
    look: ClassVar[str]  # the command that shows the session's records ({session_id} filled in), for the hint

    def __init__(self, session_id: str, seq: int, reason: str, *, path: str | None = None) -> None:
        reason = " ".join(reason.split())  # one line, whatever the decoder said
        super().__init__(f"session {session_id} has a damaged {self.record}: {self.item} {seq} {self.fails} "
                         f"({reason}); it was left untouched", path=path,
                         hint="the database was changed outside Strata; restore it from a backup, or "
                              + self.look.format(session_id=session_id))
        self.session_id = session_id
        self.seq = seq
        self.reason = reason


class DamagedEvent(DamagedRecord):
    """A stored event that does not load as an event: the log was edited or damaged outside Strata. Reported,
    never repaired or skipped (the state would silently differ from the log)."""

    record = "log"
    item = "event"
    fails = "does not load"
    look = "`strata timeline {session_id}` to see what happened"


class DamagedRow(DamagedRecord):
    """A stored timeline row whose fields are not what the row type allows (a row edited outside Strata). The
    stores read it back as stored, so that `--verify` can name it; a surface that shows rows reports it instead
    of showing it."""

    record = "timeline"
    item = "row"
    fails = "does not read back"
    look = "`strata timeline {session_id} --verify` to name every changed row"


class DamagedSession(StoreError):
    """A stored session row that does not read back as a session (edited outside Strata): reported, never
    repaired; the other sessions are still read."""

    def __init__(self, session_id: str, reason: str, *, path: str | None = None) -> None:
        reason = " ".join(reason.split())
        super().__init__(f"session {session_id} has a damaged session row ({reason}); it was left untouched",
                         path=path, hint="the database was changed outside Strata; restore it from a backup")
        self.session_id = session_id
        self.reason = reason


class InconsistentLog(StrataError):
    """A session's events load, but `fold` rejects them (a log that breaks the state machine)."""

    def __init__(self, session_id: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"session {session_id} has an inconsistent log: {' '.join(reason.split())}",
                         hint=hint or f"the log was left untouched; `strata timeline {session_id}` shows what "
                                      "happened")
        self.session_id = session_id
        self.reason = reason


class SessionNotFound(StrataError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}", hint="`strata sessions` lists the sessions")
        self.session_id = session_id


class LeaseOwner(Protocol):
    """Who holds a session's lease, as the lease records it (memory/rows.py LeaseHolder): enough to tell one
    process from every other (memory/liveness.py held_here), not only a pid."""

    @property
    def pid(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def proc_start(self) -> str: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def pid_ns(self) -> str: ...


class SessionActive(StrataError):
    """The session's lease is held by a live process: `owner` says which, in words; `holder` is that process as the
    lease records it (None where it was not at hand)."""

    def __init__(self, session_id: str, owner: str, holder: LeaseOwner | None = None) -> None:
        super().__init__(f"session {session_id} is active in another process ({owner})",
                         hint="wait for it to finish, or stop that process; a dead owner's lease is recovered")
        self.session_id = session_id
        self.owner = owner
        self.holder = holder


class LeaseLost(StrataError):
    """This process drove the session, but its lease is no longer its own (it expired unrenewed and another
    process took it): it stops before anything else of the session runs or is written."""

    def __init__(self, session_id: str, owner: str | None) -> None:
        by = f" ({owner})" if owner else ""
        super().__init__(f"session {session_id} was taken over by another process{by} while this one drove it; "
                         "this process stopped", hint=f"`strata show {session_id}` shows where the session stands")
        self.session_id = session_id
        self.owner = owner


class OrphanRunning(StrataError):
    """A call's command outlived the Strata process that started it (killed with SIGKILL) and still runs, so a
    resume does not go on beside it."""

    exit_code = 6  # agent/outcome.py EXIT_ORPHAN_RUNNING

    def __init__(self, session_id: str, call_id: str, tool: str, group: str, waited_s: float) -> None:
        super().__init__(f"session {session_id}: call {call_id} ({tool}) is still running as an orphan ({group}, "
                         f"waited {waited_s:g} s): its Strata process stopped while it ran; nothing was run beside "
                         "it", hint=f"resume again once it has ended, or `strata resume {session_id} "
                                    "--kill-orphans` to kill its process group first")
        self.session_id = session_id
        self.call_id = call_id
        self.group = group


class Stopped(StrataError):
    """A termination signal stopped the command. Whatever ran was closed as Ctrl-C closes it: a running command's
    process group killed, its receipt settled as unknown, the open batch closed, the lease released."""

    def __init__(self, signal_name: str, signal_number: int) -> None:
        super().__init__(f"stopped by {signal_name}: anything running was stopped as Ctrl-C stops it (a running "
                         "command's process group killed, started effects recorded as unknown, the batch closed)",
                         hint="`strata sessions` lists the session; `strata resume ID` continues it")
        self.signal_name = signal_name
        self.exit_code = 128 + signal_number


class ReceiptError(StrataError):
    def __init__(self, message: str, *, receipt_id: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.receipt_id = receipt_id


class ModelError(StrataError):
    """The model path failed. The message is one line: what failed, the request id, what to do. `retryable` says
    the last fault was transient (so the retries ran out, or their time budget did); `attempts` is how many
    requests were sent; `error_kind` is a `core.model.ModelErrorKind`."""

    def __init__(self, message: str, *, retryable: bool = False, request_id: str | None = None,
                 status_code: int | None = None, error_kind: str | None = None, attempts: int = 1,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retryable = retryable
        self.request_id = request_id
        self.status_code = status_code
        self.error_kind = error_kind
        self.attempts = attempts
