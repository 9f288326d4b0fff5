"""Strata's error tree. Every error a user can meet is one of these, carries typed fields, and renders as one
clear line plus an optional hint (never a traceback).

    StrataError                      base: .message, .hint, .exit_code
    ├── misuse (exit 2)
    │   ├── UsageError               a bad command line or argument
    │   │   └── ProjectHooksMissing  a resume would lose the trusted project hooks its session started with
    │   ├── ConfigError              a bad setting: file, key, reason
    │   └── ScriptError              a malformed scripted-model file (path, entry, reason)
    ├── run failures (exit 1)
    │   ├── StoreError               the database cannot be used (corrupt, locked, missing, unwritable)
    │   │   ├── PersistError         a commit failed; nothing that depended on it ran
    │   │   │   └── UnstorableEvent  an event would not read back as written; nothing of the commit was kept
    │   │   └── DamagedEvent         a stored event does not load (a log edited or damaged outside Strata)
    │   ├── InconsistentLog          a session's events load but break the state machine (fold rejects them)
    │   ├── SessionNotFound          no session with that id
    │   ├── SessionActive            another live process holds the session's lease
    │   ├── ReceiptError             a receipt cannot be reconciled as asked
    │   └── ModelError               the model path failed (retryable or not)
    └── control signals the loop catches on purpose
        └── (added by later issues: ApprovalRequired, ...)
"""

from __future__ import annotations


class StrataError(Exception):
    """Base of every error Strata reports to a user."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
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
        super().__init__(message, path=path, hint=hint or "no tool ran after the failed commit; fix the database "
                                                          "and `strata resume` the session")
        self.session_id = session_id


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


class DamagedEvent(StoreError):
    """A stored event that does not load as an event: the log was edited or damaged outside Strata. Reported,
    never repaired or skipped (the state would silently differ from the log)."""

    def __init__(self, session_id: str, seq: int, reason: str, *, path: str | None = None) -> None:
        reason = " ".join(reason.split())  # one line, whatever the decoder said
        super().__init__(f"session {session_id} has a damaged log: event {seq} does not load ({reason}); "
                         "it was left untouched", path=path,
                         hint="the database was changed outside Strata; restore it from a backup, or "
                              f"`strata timeline {session_id}` to see what happened")
        self.session_id = session_id
        self.seq = seq
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


class SessionActive(StrataError):
    def __init__(self, session_id: str, owner: str) -> None:
        super().__init__(f"session {session_id} is active in another process ({owner})",
                         hint="wait for it to finish, or stop that process; a dead owner's lease is recovered")
        self.session_id = session_id
        self.owner = owner


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
