"""Human-readable rendering of committed events (plain lines; the interactive terminal lands with the chat
issue)."""

from __future__ import annotations

from collections.abc import Callable, Collection

from core.events import (
    AssistantMessage,
    BatchProposed,
    CallResult,
    Compacted,
    KnowledgeChanged,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    StoredEvent,
    ToolsChanged,
    UserMessage,
)
from core.json_text import encoder
from core.messages import TextBlock

_MARK = {"ok": "ok", "error": "error", "denied": "DENIED", "timeout": "TIMEOUT", "unknown": "UNKNOWN"}


_json = encoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)` with its C encoder built once (core/json_text.py): the same text."""


def _short(value: object, limit: int = 90) -> str:
    text = _json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str, limit: int = 100) -> str:
    """The start of `text` on one line (line breaks shown as ' | '), cut at `limit`."""
    line = " | ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def event_lines(item: StoredEvent) -> list[str]:
    ev = item.event
    match ev:
        case SessionStarted():
            return [f"session {ev.session_id}", f"  workspace {ev.workspace}", f"  model {ev.model}"]
        case SessionResumed():
            note = f" (finishing open batch {ev.open_batch_id})" if ev.open_batch_id else ""
            return [f"resumed{note}"]
        case UserMessage():
            who = "user" if ev.source == "user" else "strata"
            return [f"{who}: {_first_line(ev.text)}"]
        case AssistantMessage():
            return [f"assistant: {b.text}" for b in ev.content if isinstance(b, TextBlock)]
        case BatchProposed():
            lines = [f"assistant: {b.text}" for b in ev.content if isinstance(b, TextBlock)]
            return lines + [f"  -> {c.tool} {_short(c.input)}  [{c.call_id}]" for c in ev.calls]
        case CallResult():
            if ev.status == "denied":  # one line: the deciding reason (the last one says what would allow it)
                reason = ev.reasons[-1] if ev.reasons else ev.content
                return [f"  <- {ev.tool} [{ev.call_id}] DENIED by {ev.check}: {_first_line(reason, 400)}"]
            return [f"  <- {ev.tool} {_MARK[ev.status]}: {_first_line(ev.content)}"]
        case SessionEnded(status="failed"):
            return ["session failed (the error is on stderr)"]  # one line carries the reason, not two
        case SessionEnded():
            return [f"session {ev.status}" + (f": {ev.reason}" if ev.reason else "")]
        case Compacted():
            return [f"(context compacted: {ev.upto_message} earlier messages summarized, "
                    f"~{ev.tokens_before} -> ~{ev.tokens_after} tokens)"]
        case KnowledgeChanged():
            return [f"strata: the knowledge corpus changed ({ev.previous_digest or 'none'} -> {ev.digest or 'none'}); "
                    "the model is told"]
        case ToolsChanged():
            return [f"strata: tools from MCP servers changed ({', '.join((*ev.changed, *ev.added, *ev.removed))}); "
                    "the model is told"]
        case _:
            return []


class Tally:
    """The calls of one headless run by outcome, for its summary: whether every effectful call was denied."""

    def __init__(self, effectful: Collection[str]) -> None:
        self._effectful = frozenset(effectful)
        self.effectful_denied: list[str] = []
        self.effectful_other = 0

    def observe(self, item: StoredEvent) -> None:
        ev = item.event
        if isinstance(ev, CallResult) and ev.tool in self._effectful:
            if ev.status == "denied":
                self.effectful_denied.append(ev.tool)
            else:
                self.effectful_other += 1

    def summary(self) -> str | None:
        """A line when the run proposed effectful calls and denied every one (nothing was changed)."""
        if not self.effectful_denied or self.effectful_other:
            return None
        tools = sorted(set(self.effectful_denied))
        allow = " ".join(f"--allow {t}" for t in tools)
        return (f"every effectful call was denied ({len(self.effectful_denied)}: {', '.join(tools)}): nothing was "
                f"written or run; to let them run, allow them ({allow}) or park them for a person (--on-ask park)")


def printer(echo: Callable[[str], None]) -> Callable[[StoredEvent], None]:
    def observe(item: StoredEvent) -> None:
        for line in event_lines(item):
            echo(line)

    return observe
