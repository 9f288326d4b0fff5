"""The loop's own timeline rows: phase transitions, model attempts (retries and their reasons included) and
lifecycle (started, resumed, parked, interrupted, ended). Staged on the session writer, so each rides with the
commit of the state event it observes; every summary passes through the one masking module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.masking import Masker
from core.model import ModelAttempt, ModelListener
from core.timeline import TimelineEntry
from core.timeline_rows import LifecycleRow, ModelAttemptRow, Usage, attempt_entry, phase_entry
from core.utf8 import TextStream
from memory.session_writer import SessionWriter


class LoopRecorder:
    def __init__(self, writer: SessionWriter, masker: Masker) -> None:
        self.writer = writer
        self.masker = masker
        self.turn = 0
        self.observed: list[tuple[str, int, str, dict[str, Any]]] = []
        """Lifecycle events not yet given to observation hooks (the loop hands them over after each run)."""

    def phase(self, name: str, turn: int, summary: str = "", *, batch_id: str | None = None,
              calls: list[str] | None = None, notes: list[str] | None = None) -> None:
        mask = self.masker.mask
        self.writer.stage_timeline(phase_entry(  # PhaseRow's entry, without the typed row (core/timeline_rows.py)
            turn, name, mask(summary or name), batch_id=None if batch_id is None else mask(batch_id),
            calls=None if calls is None else tuple(mask(c) for c in calls),
            notes=None if notes is None else tuple(mask(n) for n in notes)))

    def lifecycle(self, what: str, turn: int, summary: str = "", **data: Any) -> None:
        masked = self.masker.mask_value(data) if data else {}
        self.writer.stage_timeline(LifecycleRow(turn=turn, what=what, summary=self.masker.mask(summary or what),
                                                details=masked))
        self.observed.append((what, turn, self.masker.mask(summary or what), masked))

    def attempt(self, attempt: ModelAttempt) -> None:
        entry = _plain_attempt_entry(attempt, self.turn, self.masker)
        self.writer.stage_timeline(entry if entry is not None else attempt_row(attempt, self.turn, self.masker))


def attempt_row(attempt: ModelAttempt, turn: int, masker: Masker) -> ModelAttemptRow:
    """A model attempt as its typed row (masked summary; the usage as the model reported it)."""
    u = attempt.usage
    usage = None if u is None else Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                                         cache_read_tokens=u.cache_read_tokens, cache_write_tokens=u.cache_write_tokens)
    return ModelAttemptRow(turn=turn, number=attempt.number, outcome=attempt.outcome,
                           duration_ms=round(attempt.duration_ms, 3), error_kind=attempt.error_kind,
                           status_code=attempt.status_code, request_id=attempt.request_id,
                           retry_after_s=attempt.retry_after_s, delay_s=attempt.delay_s, usage=usage,
                           summary=masker.mask(attempt.message or attempt.outcome))


_OUTCOMES = frozenset({"ok", "retry", "error"})


def plain_attempt(attempt: ModelAttempt, turn: int) -> tuple[float, dict[str, int] | None] | None:
    """What `attempt_row(attempt, turn, ...)` keeps of the attempt's duration and usage (`duration_ms`, and
    `usage.model_dump()` or None), when every field already has exactly the type the typed rows would keep
    unchanged; None otherwise (the typed row must be built: it converts or refuses)."""
    a, u = attempt, attempt.usage
    duration = round(a.duration_ms, 3)
    if not (type(turn) is int and type(a.number) is int and type(a.outcome) is str and a.outcome in _OUTCOMES
            and type(duration) is float and type(a.message) is str
            and (a.error_kind is None or type(a.error_kind) is str)
            and (a.status_code is None or type(a.status_code) is int)
            and (a.request_id is None or type(a.request_id) is str)
            and (a.retry_after_s is None or type(a.retry_after_s) is float)
            and (a.delay_s is None or type(a.delay_s) is float)):
        return None
    usage = None
    if u is not None:
        usage = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                 "cache_read_tokens": u.cache_read_tokens, "cache_write_tokens": u.cache_write_tokens}
        if any(type(v) is not int for v in usage.values()):
            return None
    return duration, usage


def _plain_attempt_entry(attempt: ModelAttempt, turn: int, masker: Masker) -> TimelineEntry | None:
    """`attempt_row(...).entry()` without the typed rows (ModelAttemptRow and Usage, three pydantic models a model
    turn) when every field already has exactly the type those rows would keep unchanged (an int where they want an
    int, a float where they want a float: the adapters' usual output); None otherwise, and the typed row is built,
    converting or refusing as it always did. The same entry, field for field (tests/agent/test_timeline_rows.py)."""
    plain = plain_attempt(attempt, turn)
    if plain is None:
        return None
    a, (duration, usage) = attempt, plain
    return attempt_entry(turn, a.number, a.outcome, masker.mask(a.message or a.outcome), duration_ms=duration,
                         error_kind=a.error_kind, status_code=a.status_code, request_id=a.request_id,
                         retry_after_s=a.retry_after_s, delay_s=a.delay_s, usage=usage)


class AttemptTee:
    """A model listener that forwards live text to the surface's listener and hands every attempt to
    `on_attempt` first (the timeline, the evidence ledger). Live text is passed on as valid UTF-8 (core/utf8.py):
    a model may stream unpaired surrogates, which no terminal can print; the stored answer is repaired the same
    way by the plan phase."""

    def __init__(self, on_attempt: Callable[[ModelAttempt], None], inner: ModelListener | None) -> None:
        self._on_attempt = on_attempt
        self._inner = inner
        self._text = TextStream()

    def on_text(self, delta: str) -> None:
        if self._inner is not None:
            text = self._text.feed(delta)
            if text:
                self._inner.on_text(text)

    def on_attempt(self, attempt: ModelAttempt) -> None:
        held = self._text.flush()  # the attempt is over: a surrogate held back has no other half coming
        if held and self._inner is not None:
            self._inner.on_text(held)
        self._on_attempt(attempt)
        if self._inner is not None:
            self._inner.on_attempt(attempt)
