"""The evidence ledger (ARCHITECTURE.md section 7): one JSONL file per session, `<home>/ledger/<session>.jsonl`, of
masked diagnostic rows, one per tool call (denied and parked ones included) and one per model attempt. A call row
carries the sha256 of the raw arguments and of the raw result, so it can be matched with the state log, a receipt
or a file without holding either.

It is best effort and kept off the loop's path. When a call or an attempt is observed only references are kept;
once a commit has carried them (the loop's observer sees its events) the rows go to one writer thread per ledger,
which masks, serialises and appends them with one write and flush for all the commits handed over within
GATHER_S of each other, so a slow disk never holds up the loop. The ledger is in no transaction with the timeline
or the state log: rows whose commit never came (it failed, the run was interrupted) are written at close with
`"committed": false`. A row that cannot be built or written is counted in `failures` and logged (the first one as
a warning); nothing here ever raises into the loop. A resumed session appends to the same file.

Beside it, `<home>/ledger/<session>.heads` records where the session's logs ended: one line per write (the head
of the newest commit the writer has seen: last seq and hash of the state log and of the timeline, see
core/chain.py), and one at close. It is outside the database, so someone who can change only the database cannot
move it back: `strata timeline ID --verify` compares it with the chains and the session row's head, and a
truncated tail shows. Best effort like the rest: it lags the database by whatever the writer had not written
when the process stopped (after a SIGKILL, the commits of about the last GATHER_S), never leads it.

Over 400 lines as one concept: the ledger, its rows, its writer thread and its heads file."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import structlog

from agent.loop import Observer
from agent.timeline_rows import AttemptTee, attempt_row, plain_attempt
from config.ledger_files import HEADS_SUFFIX
from config.private_files import open_private, private_dir
from core.chain import ChainHead, same_head
from core.clock import Clock, iso
from core.events import StoredEvent
from core.hashing import canonical_json, sha256_text
from core.json_text import encoder
from core.masking import Masker
from core.model import ModelAttempt, ModelListener
from core.record import record
from memory.session_writer import SessionWriter
from tool_executor import CallRecord, ReceiptChange, Recorder

log = structlog.get_logger("strata.ledger")
_row_json = encoder(ensure_ascii=False)
"""`json.dumps(row, ensure_ascii=False)` with its C encoder built once (core/json_text.py): the same text."""
_head_json = encoder()
"""`json.dumps(line)`, the same way."""
_ascii_text = json.encoder.encode_basestring_ascii  # how that encoder writes a str

ROW_VERSION = 1
EXCERPT_CHARS = 1000
CLOSE_TIMEOUT_S = 10.0
GATHER_S = 0.02
"""How long the writer lets commits gather once it is handed one, before it writes them all with one write and one
head line: a turn of read-only calls makes two commits in a few milliseconds, and waking the writer, writing a
head line and flushing two files for each commit was about a third of the writer's work (the writer's thread is
about a tenth of each turn's instructions). Closing the ledger cuts the wait short."""


@record(slots=True)
class _Call:
    """A call's record as the ledger saw it, and when."""

    record: CallRecord
    at: datetime


@record(slots=True)
class _Attempt:
    """A model attempt as the ledger saw it, in its turn, and when."""

    attempt: ModelAttempt
    turn: int
    at: datetime


_Observation = _Call | _Attempt
_Batch = tuple[list[_Observation], datetime | None, ChainHead | None]
"""Observations, the time of the commit that carried them (None: no commit did), and the head after it."""


class EvidenceLedger:
    def __init__(self, path: Path, session_id: str, masker: Masker, clock: Clock, turn: Callable[[], int],
                 head: Callable[[], ChainHead | None] | None = None, *, gather_s: float = GATHER_S) -> None:
        self.path = path
        self.heads_path = path.with_name(path.stem + HEADS_SUFFIX)
        self.session_id = session_id
        self.masker = masker
        self.turn = turn
        """The turn a model attempt belongs to (the loop's current turn)."""
        self.head = head
        """Where the session's logs end after the store's last commit (the store's `chain_head`)."""
        self._clock = clock
        self._pending: list[_Observation] = []
        self._queue: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._gather_s = gather_s
        self._closing = threading.Event()
        """Set by `aclose`: the writer stops gathering and writes what it has."""
        self._file: BinaryIO | None = None
        self._heads_file: BinaryIO | None = None
        self._last_head: ChainHead | None = None
        self.rows_written = 0
        self.failures = 0
        """Rows that could not be built or written."""
        self.head_failures = 0
        """Head lines that could not be written."""

    # -- observing (in the loop: cheap, never raises) ------------------------------------------------------------

    def call(self, record: CallRecord) -> None:
        self._observe(lambda now: _Call(record, now))

    def attempt(self, attempt: ModelAttempt) -> None:
        self._observe(lambda now: _Attempt(attempt, self.turn(), now))

    def committed(self, at: datetime | None) -> None:
        """A commit was made: what was observed before it, and the head it left, go to the writer."""
        head = self._new_head()
        if not self._pending and head is None:
            return
        batch, self._pending = self._pending, []
        if self._writer_started(len(batch)):
            self._queue.put((batch, at, head))

    def note_head(self, head: ChainHead) -> None:
        """A commit made outside the loop (a reconcile, a decision, a fork) left `head`: it goes to the writer,
        after whatever is queued already, so the heads file's last line stays the newest (never raises)."""
        if same_head(head, self._last_head):
            return
        self._last_head = head
        if self._writer_started(0):
            self._queue.put(([], None, head))

    def _writer_started(self, rows: int) -> bool:
        """The writer thread runs (started now if it was not). False when no thread is to be had: the `rows` about
        to be queued are lost, counted and logged, and the loop goes on."""
        if self._thread is None:
            self._closing.clear()
            thread = threading.Thread(target=self._write_loop, name=f"strata-ledger-{self.session_id}", daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:
                self._failed(rows, "cannot start the ledger writer", exc)
                return False
            self._thread = thread
        return True

    def _new_head(self) -> ChainHead | None:
        """The store's head if it moved since the last one queued (never raises)."""
        try:
            head = self.head() if self.head is not None else None
        except Exception:
            return None
        if head is None or same_head(head, self._last_head):
            return None
        self._last_head = head
        return head

    def _observe(self, make: Callable[[datetime], _Observation]) -> None:
        try:
            self._pending.append(make(self._clock.now()))
        except Exception as exc:
            self._failed(1, "cannot observe for the ledger", exc)

    # -- wiring: the recorder, listener and observer the loop is given --------------------------------------------

    def recorder(self, inner: Recorder) -> Recorder:
        return _LedgerRecorder(inner, self)

    def listener(self, inner: ModelListener | None) -> ModelListener:
        return AttemptTee(self.attempt, inner)

    def observer(self, inner: Observer | None) -> Observer:
        last_at: list[datetime | None] = [None]

        def observe(item: StoredEvent) -> None:
            # The events of one commit share its one `at` object (the store stamps a commit once), and nothing is
            # observed between them (the loop hands them over in one go): the head moves, and the observations
            # queue, only at a commit's first event. Later events of the same commit skip building and comparing
            # the head (a ChainHead model each). A store that gives each event its own `at` object is asked every
            # time, as before.
            if item.at is not last_at[0]:
                last_at[0] = item.at
                self.committed(item.at)
            if inner is not None:
                inner(item)

        return observe

    async def aclose(self) -> None:
        """Write what is left (rows no commit carried are marked so) and stop the writer."""
        self.committed(None)
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._closing.set()
        self._queue.put(None)
        await anyio.to_thread.run_sync(thread.join, CLOSE_TIMEOUT_S)
        if thread.is_alive():
            log.warning("the evidence ledger is still writing; rows may be lost", path=str(self.path),
                        session_id=self.session_id)

    # -- the writer thread ------------------------------------------------------------------------------------

    def _write_loop(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                break
            if self._gather_s > 0:  # the commits of the next few milliseconds join this write (GATHER_S)
                self._closing.wait(self._gather_s)
            batches = [item]
            while True:  # whatever else is queued goes in the same write
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batches.append(more)
            self._write(batches)
        if self._file is not None:
            self._close_file()
        f, self._heads_file = self._heads_file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _write(self, batches: list[_Batch]) -> None:
        lines: list[str] = []
        head: ChainHead | None = None
        for observations, committed_at, moved in batches:
            head = moved or head
            for obs in observations:
                try:
                    lines.append(_row_json(self._row(obs, committed_at)) + "\n")
                except Exception as exc:
                    self._failed(1, "cannot build a ledger row", exc)
        if lines:
            self._write_rows(lines)
        if head is not None:
            self._write_head(head)

    def _write_head(self, head: ChainHead) -> None:
        """One line per write: only the newest head matters, and it is what a truncation is compared with."""
        line = head_line(self.session_id, head, self._clock.now())
        try:
            f = self._heads_file or self._open_heads()
            f.write(line.encode("utf-8"))
            f.flush()
        except OSError as exc:
            self.head_failures += 1
            first = self.failures == 0 and self.head_failures == 1
            (log.warning if first else log.debug)("cannot write the ledger's head", path=str(self.heads_path),
                                                  session_id=self.session_id, error=exc.strerror or str(exc))
            held, self._heads_file = self._heads_file, None
            if held is not None:
                with contextlib.suppress(OSError):
                    held.close()

    def _open_heads(self) -> BinaryIO:
        self._heads_file = _open_lines(self.heads_path)
        return self._heads_file

    def _write_rows(self, lines: list[str]) -> None:
        try:
            f = self._file or self._open()
            f.write("".join(lines).encode("utf-8", "backslashreplace"))
            f.flush()
        except OSError as exc:
            self._failed(len(lines), "cannot write the evidence ledger", exc)
            self._close_file()  # reopened, on a fresh line, for the next batch
            return
        self.rows_written += len(lines)

    def _open(self) -> BinaryIO:
        self._file = _open_lines(self.path)
        return self._file

    def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _failed(self, rows: int, what: str, exc: BaseException) -> None:
        first = self.failures == 0
        self.failures += rows
        emit = log.warning if first else log.debug
        emit(what, path=str(self.path), session_id=self.session_id, rows=rows,
             error=getattr(exc, "strerror", None) or str(exc) or type(exc).__name__, failures=self.failures)

    # -- rows -------------------------------------------------------------------------------------------------

    def _row(self, obs: _Observation, committed_at: datetime | None) -> dict[str, Any]:
        match obs:
            case _Call(record=record):
                body = _call_row(record, self.masker)
            case _Attempt(attempt=attempt, turn=turn):
                body = _attempt_row(attempt, turn, self.masker)
        return {"v": ROW_VERSION, "session_id": self.session_id, **body, "observed_at": iso(obs.at),
                "committed_at": iso(committed_at) if committed_at else None, "committed": committed_at is not None}


def head_line(session_id: str, head: ChainHead, now: datetime) -> str:
    """A heads file's line: where the session's logs ended, as of `now`. Written field by field when every value
    is exactly of the type its field holds (a head the store made: ints and hex text), the same text `json.dumps`
    writes of the row (tests/agent/test_ledger_head_line.py); anything else through the encoder, as always."""
    values = head.__dict__
    events_seq, events_hash = values["events_seq"], values["events_hash"]
    timeline_seq, timeline_hash = values["timeline_seq"], values["timeline_hash"]
    at = iso(now)
    if (type(session_id) is str and type(events_seq) is int and type(events_hash) is str
            and type(timeline_seq) is int and type(timeline_hash) is str and type(at) is str and len(values) == 4):
        return (f'{{"v": {ROW_VERSION}, "kind": "head", "session_id": {_ascii_text(session_id)}, '
                f'"events_seq": {int.__repr__(events_seq)}, "events_hash": {_ascii_text(events_hash)}, '
                f'"timeline_seq": {int.__repr__(timeline_seq)}, "timeline_hash": {_ascii_text(timeline_hash)}, '
                f'"observed_at": {_ascii_text(at)}}}\n')
    return _head_json({"v": ROW_VERSION, "kind": "head", "session_id": session_id, **head.model_dump(),
                       "observed_at": at}) + "\n"


def _open_lines(path: Path) -> BinaryIO:
    """A JSON-lines file (0600, in a 0700 directory) opened to append, on a fresh line."""
    private_dir(path.parent)
    f = os.fdopen(open_private(path, os.O_RDWR | os.O_APPEND), "a+b")
    try:
        size = f.seek(0, os.SEEK_END)
        if size:  # a torn last line (a crash, a failed write) must not swallow the next row
            f.seek(size - 1)
            if f.read(1) != b"\n":
                f.write(b"\n")
    except OSError:
        f.close()
        raise
    return f


def _call_row(record: CallRecord, masker: Masker) -> dict[str, Any]:
    """The ledger's projection of a call record (the timeline's is tool_executor/_recorder.py)."""
    d, result, call = record.decision, record.result, record.call
    decision, by = record.verdict()
    args = d.input if d is not None else call.input
    row: dict[str, Any] = {
        "kind": "call", "turn": record.env.turn, "call_id": masker.mask(call.call_id),
        "batch_id": result.batch_id if result else None, "tool": masker.mask(record.tool), "decision": decision,
        "check": masker.mask(by) if by and not record.settled_on_resume else by,
        "outcome": result.status if result else None,
        "duration_ms": result.duration_ms if result else None,
        "args_sha256": d.input_sha256 if d is not None else call.input_sha256,
        "result_sha256": sha256_text(result.content) if result else None,
        "receipt_id": record.receipt_id if not record.settled_on_resume else result.receipt_id if result else None,
        "steps": [[s.check, s.outcome, masker.mask(s.detail)] for s in (*record.steps, *record.post_steps)],
        "args": masker.excerpt(canonical_json(dict(args)), EXCERPT_CHARS),
        "result": masker.excerpt(result.content, EXCERPT_CHARS) if result else None,
    }
    if d is not None and (d.tool != call.tool or d.input_sha256 != call.input_sha256):
        row["proposed"] = {"tool": masker.mask(call.tool), "args_sha256": call.input_sha256}
    if record.lock:
        row["lock"] = masker.mask(record.lock)
    if record.settled_on_resume:
        row["settled_on_resume"] = True
    elif record.settled_by:
        row["settled_by"] = masker.mask(record.settled_by)
    if record.receipts:
        row["receipts"] = [[c.transition, c.status] if c.status else [c.transition] for c in record.receipts]
    return row


def _attempt_row(attempt: ModelAttempt, turn: int, masker: Masker) -> dict[str, Any]:
    """The ledger's projection of a model attempt (the timeline's is its typed row: the duration and usage are that
    row's, taken without building it when its fields are of the exact types it keeps: `plain_attempt`)."""
    duration: float | None
    usage: dict[str, Any] | None
    plain = plain_attempt(attempt, turn)
    if plain is None:
        typed = attempt_row(attempt, turn, masker)
        duration, usage = typed.duration_ms, None if typed.usage is None else typed.usage.model_dump()
    else:
        duration, usage = plain
    return {"kind": "model_attempt", "turn": turn, "attempt": attempt.number, "outcome": attempt.outcome,
            "error_kind": attempt.error_kind, "status_code": attempt.status_code,
            "request_id": masker.mask(attempt.request_id) if attempt.request_id else None,
            "duration_ms": duration, "retry_after_s": attempt.retry_after_s,
            "delay_s": attempt.delay_s, "message": masker.excerpt(attempt.message, EXCERPT_CHARS),
            "usage": usage}


def excerpt(masker: Masker, text: str, limit: int = EXCERPT_CHARS) -> str:
    """About the first `limit` characters of `text`, masked before they are cut (`Masker.excerpt`)."""
    return masker.excerpt(text, limit)


class _LedgerRecorder(Recorder):
    """The timeline's recorder, and the ledger beside it."""

    def __init__(self, inner: Recorder, ledger: EvidenceLedger) -> None:
        self.inner = inner
        self.ledger = ledger

    def call(self, record: CallRecord, writer: SessionWriter) -> None:
        self.inner.call(record, writer)
        self.ledger.call(record)

    def receipt(self, record: CallRecord, change: ReceiptChange, writer: SessionWriter) -> None:
        self.inner.receipt(record, change, writer)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class Ledgers:
    """The evidence ledgers of one runtime, under `directory`: one per session, kept while the session runs in this
    process (closed when its live session is released, or with the runtime)."""

    def __init__(self, directory: Path, clock: Clock) -> None:
        self.directory = directory
        self._clock = clock
        self._open: dict[str, EvidenceLedger] = {}

    def path(self, session_id: str) -> Path:
        return self.directory / f"{_UNSAFE.sub('_', session_id)}.jsonl"

    def heads_path(self, session_id: str) -> Path:
        return self.directory / f"{_UNSAFE.sub('_', session_id)}{HEADS_SUFFIX}"

    def open(self, session_id: str, masker: Masker, *, turn: Callable[[], int],
             head: Callable[[], ChainHead | None] | None = None) -> EvidenceLedger:
        ledger = self._open.get(session_id)
        if ledger is None:
            ledger = self._open[session_id] = EvidenceLedger(self.path(session_id), session_id, masker, self._clock,
                                                             turn, head)
        else:
            ledger.masker, ledger.turn, ledger.head = masker, turn, head or ledger.head
        return ledger

    def last_head(self, session_id: str) -> ChainHead | None:
        """The newest head the ledger recorded for the session (None: none, or the file cannot be read)."""
        return read_last_head(self.heads_path(session_id), session_id)

    async def note_commit(self, session_id: str, head: ChainHead | None) -> None:
        """Record `head`, left by a commit made outside a session's loop (a reconcile, an approval or denial, a
        fork), in the session's heads file, as the loop's commits are: otherwise rows such a commit added could be
        removed, and the session row's head moved back, without `--verify` seeing it. Through the session's ledger
        when this runtime has it open (its writer keeps the lines in order), else appended here. Best effort like
        the rest of the ledger: a failure is logged, never raised."""
        if head is None:
            return
        ledger = self._open.get(session_id)
        if ledger is not None:
            ledger.note_head(head)
            return
        line = head_line(session_id, head, self._clock.now()).encode("utf-8")
        path = self.heads_path(session_id)

        def append() -> None:
            with _open_lines(path) as f:
                f.write(line)

        try:
            await anyio.to_thread.run_sync(append)
        except OSError as exc:
            log.warning("cannot write the ledger's head", path=str(path), session_id=session_id,
                        error=exc.strerror or str(exc))

    def get(self, session_id: str) -> EvidenceLedger | None:
        return self._open.get(session_id)

    async def close(self, session_id: str) -> None:
        """Close the session's ledger (its writer thread and files), when this process stops driving the session:
        a long-lived runtime (the serve daemon) would otherwise keep a thread and two open files for every session
        it ever ran. A later run of the session opens it again, appending."""
        ledger = self._open.pop(session_id, None)
        if ledger is not None:
            await ledger.aclose()

    async def aclose(self) -> None:
        ledgers, self._open = list(self._open.values()), {}
        for ledger in ledgers:
            await ledger.aclose()


HEAD_TAIL_BYTES = 8192


def read_last_head(path: Path, session_id: str) -> ChainHead | None:
    """The last well-formed head line of a heads file (a torn last line, from a crash mid-write, is skipped)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - HEAD_TAIL_BYTES))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        try:
            obj = json.loads(line)
            if obj.get("kind") == "head" and obj.get("session_id") == session_id:
                return ChainHead.model_validate({k: obj[k] for k in ChainHead.model_fields})
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return None
