"""The `spool` channel: an inbox and an outbox folder of JSON files, one message or reply per file.

Inbox: a writer puts `NAME.json` there atomically (write `.NAME.tmp`, then rename; names starting with `.` are
never read). Oldest first (modification time, then name). A file is acknowledged by removing it, after the daemon
recorded it. A file that is not a valid message (bad JSON, missing fields, over `MAX_FILE_BYTES`) or names a
thread the channel may not take, or reuses a message id another thread took (the id names the message and its reply),
is moved to `inbox/rejected/` with a `NAME.error` line saying why (as `NAME.1`,
`NAME.2`, ... when an earlier rejected file has the name: none is replaced); nothing else happens to it.

    {"thread": "t-42", "id": "m-1001", "sender": "anna@example.com", "text": "Please review the Q3 report",
     "attachments": [{"name": "q3.pdf", "sha256": "<64 hex>", "path": "/srv/in/q3.pdf"}]}

Outbox: each reply is `<key>.json` (key: `reply-` + 32 hex digits of sha256(channel, message id)), written to a
temporary name and renamed, never replaced: a second send of the same key finds it there and does nothing, so a
crash between the two never delivers a reply twice; whether a reply was delivered is whether its file exists.

`rejected/` and the outbox, removed while the daemon runs, are made again when next written to, with a warning
in the daemon's log (the inbox is the writer's: it is not). Both are pruned (`keep_replies_days`,
`keep_rejected_days`; what a reply must no longer be needed for: agent/channels/_retention.py): a reader of the
outbox has `keep_replies_days` to take a reply."""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import json
import os
import re
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import structlog
from pydantic import ValidationError

from agent.channels._messages import InboundMessage, Reply, reply_key
from core import bounded_json

log = structlog.get_logger("strata.channels")

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
"""A message is shallow; deeper JSON is refused before it is parsed (core/bounded_json.py)."""
REJECTED = "rejected"
_REPLY_FILE = re.compile(r"^(reply-[0-9a-f]{32})\.json$")


@dataclass(frozen=True)
class OldReply:
    """A reply file of the channel's, written before a prune's cutoff (agent/channels/_retention.py)."""

    key: str
    message_id: str
    path: Path


class SpoolChannel:
    def __init__(self, name: str, inbox: Path, outbox: Path, threads: tuple[str, ...] = ("*",)) -> None:
        self.name = name
        self.inbox = inbox
        self.outbox = outbox
        self.threads = threads
        for folder in (inbox, outbox, inbox / REJECTED):
            folder.mkdir(parents=True, exist_ok=True)

    def poll(self, skip: Collection[str] = ()) -> list[tuple[InboundMessage, str]]:
        """What waits, oldest first, with its handle; handles in `skip` (queued already) are not read again."""
        found: list[tuple[int, str, Path]] = []
        with os.scandir(self.inbox) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".json") or entry.is_dir():
                    continue
                if entry.path in skip:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    found.append((entry.stat().st_mtime_ns, entry.name, Path(entry.path)))
        out: list[tuple[InboundMessage, str]] = []
        for _, _, path in sorted(found):
            message = self._read(path)
            if message is not None:
                out.append((message, str(path)))
        return out

    def _read(self, path: Path) -> InboundMessage | None:
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                self._reject(path, "not a regular file (a link, a device or a pipe is never read)")
                return None
            with path.open("rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._reject(path, f"cannot be read: {exc.strerror}")
            return None
        if len(raw) > MAX_FILE_BYTES:
            self._reject(path, f"larger than {MAX_FILE_BYTES} bytes")
            return None
        try:
            body = bounded_json.loads(raw.decode("utf-8"), max_depth=MAX_DEPTH)
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
            message = InboundMessage.model_validate({**body, "channel": self.name})
        except (ValueError, ValidationError) as exc:  # UnicodeDecodeError and TooDeep are ValueErrors
            self._reject(path, f"not a message: {_one_line(exc)}")
            return None
        if not any(fnmatch.fnmatchcase(message.thread, glob) for glob in self.threads):
            self._reject(path, f"thread {message.thread!r} is not one this channel may take")
            return None
        return message

    def _reject(self, path: Path, why: str) -> None:
        """Move `path` to rejected/ under its name, or NAME.1, NAME.2, ... when an earlier rejected file has it
        (never replaced), with NAME.error beside it saying why."""
        folder = self.inbox / REJECTED
        for n in itertools.count():
            target = folder / (path.name if n == 0 else f"{path.name}.{n}")
            try:
                if _move_unless_taken(path, target):
                    break
            except FileNotFoundError:
                if not os.path.lexists(path):  # taken away by its writer meanwhile
                    return
                self._remake(folder)  # removed while the daemon runs
                return self._reject(path, why)
        _write_atomically(target.with_name(target.name + ".error"), (why + "\n").encode())

    def reject(self, handle: str, why: str) -> None:
        """Set a message the daemon will not handle aside: to rejected/ with its reason (as a bad file is)."""
        log.warning("message rejected", channel=self.name, file=os.path.basename(handle), reason=why)
        self._reject(Path(handle), why)

    def ack(self, handle: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(handle)

    def send(self, reply: Reply) -> None:
        target = self.outbox / f"{reply.key}.json"
        if target.exists():
            return
        data = (json.dumps(reply.model_dump(mode="json"), ensure_ascii=False) + "\n").encode()
        try:
            _write_atomically(target, data, replace=False)
        except FileNotFoundError:
            if self.outbox.is_dir():
                raise
            self._remake(self.outbox)  # removed while the daemon runs
            _write_atomically(target, data, replace=False)

    def _remake(self, folder: Path) -> None:
        """Make again a folder of the channel's that was removed while the daemon runs, and say so."""
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            return
        log.warning("channel folder was removed while the daemon ran; made again", channel=self.name,
                    folder=str(folder))

    def sent(self, key: str) -> bool:
        return (self.outbox / f"{key}.json").exists()

    def old_replies(self, cutoff: float) -> list[OldReply]:
        """The channel's replies in the outbox written before `cutoff` (a file whose content is not this channel's
        reply under its own key is none: left alone)."""
        found: list[OldReply] = []
        try:
            with os.scandir(self.outbox) as entries:
                named = [(m.group(1), Path(e.path)) for e in entries
                         if (m := _REPLY_FILE.match(e.name)) and self._may_go(m.group(1))]
        except FileNotFoundError:
            return []
        for key, path in named:
            try:
                info = path.lstat()
                if not stat.S_ISREG(info.st_mode) or info.st_mtime >= cutoff or info.st_size > MAX_FILE_BYTES:
                    continue
                body = json.loads(path.read_bytes())
            except (OSError, ValueError):  # gone meanwhile, unreadable or cut: not known to be a reply
                continue
            message_id = body.get("in_reply_to") if isinstance(body, dict) else None
            if isinstance(message_id, str) and reply_key(self.name, message_id) == key:
                found.append(OldReply(key, message_id, path))
        return found

    def _may_go(self, key: str) -> bool:
        """Whether the reply KEY may go as far as the channel knows (a spool's reply is delivered when written)."""
        return True

    def drop_reply(self, reply: OldReply) -> bool:
        """Remove a reply nothing needs any more (the caller checked the book and the session); whether it went."""
        try:
            reply.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def prune_markers(self, cutoff: float) -> int:
        """Markers of replies gone (a spool keeps none)."""
        return 0

    def backlog(self) -> int:
        with os.scandir(self.inbox) as entries:
            return sum(1 for e in entries if e.name.endswith(".json") and not e.name.startswith("."))


def _move_unless_taken(path: Path, target: Path) -> bool:
    """Move `path` to `target` unless `target` exists: a link, then the unlink, so a name taken meanwhile is never
    replaced (where no hard link can be made, a rename after a look)."""
    try:
        os.link(path, target, follow_symlinks=False)
    except FileExistsError:
        return False
    except FileNotFoundError:
        raise
    except OSError:  # another owner's file under protected_hardlinks, or a file system without hard links
        if os.path.lexists(target):
            return False
        os.replace(path, target)
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True


def _write_atomically(target: Path, data: bytes, *, replace: bool = True) -> None:
    """Write `data` to a temporary file beside `target`, fsync it, then move it there (with `replace=False`, a
    hard link that fails when `target` exists, so a file once delivered is never replaced), and fsync the folder."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.replace(tmp, target)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _one_line(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
