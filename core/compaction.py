"""Compaction: keep the next model request within the context budget by replacing the oldest turns of the
conversation with a summary, recorded as a `Compacted` event (the events of those turns stay in the log).

Sizes are estimates, not counts: about `CHARS_PER_TOKEN` characters per token over the text a request carries
(message text, tool names, ids and inputs as JSON, tool results, a little for each block's structure, plus the
system prompt and tool definitions the caller adds).
The state keeps the conversation's size current as events are applied, so checking the budget costs nothing per
turn.

The cut always falls just before an assistant message, and the summary becomes the first (user) message. So a
tool_use and its tool_result are never separated: an assistant message with tool_use blocks and the user message
with their results are either both summarized or both kept, and the kept part starts with an assistant message
right after the summary.

The summary is a deterministic digest built without a model call: the user's prompts, the answers, and each tool
called with its outcome, every entry clipped and the whole bounded by `SUMMARY_MAX_CHARS` or an eighth of the
budget, whichever is smaller (the earliest entries and the most recent are kept, the middle is counted). A
model-written summary can replace `digest` later without touching fold: the summary text is recorded in the event,
never rebuilt on replay."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from core.events import Compacted
from core.masking import cut_head
from core.messages import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock

CHARS_PER_TOKEN = 4
DEFAULT_CONTEXT_BUDGET = 150_000
"""Tokens a request may carry before older turns are compacted."""
KEEP_FRACTION = 0.5
"""After compaction a request is about this fraction of the budget, so compaction is rare (not every turn)."""
SUMMARY_MAX_CHARS = 6_000
"""The summary's bound, and never more than an eighth of the budget (so a small budget still has room)."""
SUMMARY_HEADER = "[Summary of the earlier conversation, compacted by Strata"
BLOCK_CHARS = 16
"""A content block's own structure (its type and keys): about four tokens."""
_ENTRY_CHARS = 300
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def block_chars(block: ContentBlock) -> int:
    """Called by `apply` for every block that joins the conversation, so it is cheap: a tool input is measured by
    its repr, which is within a few characters of its JSON and several times faster to make."""
    if type(block) is TextBlock:
        return BLOCK_CHARS + len(block.text)
    if type(block) is ToolResultBlock:
        return BLOCK_CHARS + len(block.tool_use_id) + len(block.content)
    assert isinstance(block, ToolUseBlock)
    return BLOCK_CHARS + len(block.id) + len(block.name) + len(repr(block.input))


def message_chars(message: Message) -> int:
    return sum(block_chars(b) for b in message.content)


def messages_chars(messages: Sequence[Message]) -> int:
    return sum(message_chars(m) for m in messages)


def tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def compacted_messages(messages: Sequence[Message], upto: int, summary: str) -> list[Message]:
    """The conversation with its first `upto` messages replaced by the summary. ValueError if `upto` does not
    fall just before an assistant message (a cut there could separate a tool_use from its tool_result)."""
    if not 1 <= upto < len(messages) or messages[upto].role != "assistant":
        raise ValueError(f"cannot compact before message {upto} of {len(messages)}: the cut must fall just before "
                         "an assistant message")
    return [Message(role="user", content=(TextBlock(text=summary),)), *messages[upto:]]


def plan_compaction(messages: Sequence[Message], context_chars: int, *, overhead_chars: int, budget_tokens: int,
                    keep_fraction: float = KEEP_FRACTION) -> Compacted | None:
    """The `Compacted` event to record before the next request, or None when the request fits the budget (or
    nothing could be gained). `context_chars` is the size of `messages` as `messages_chars` counts it (the state
    keeps it); `overhead_chars` is the rest of the request (system prompt, tool definitions)."""
    budget_chars = budget_tokens * CHARS_PER_TOKEN
    before = overhead_chars + context_chars
    if before <= budget_chars:
        return None
    summary_limit = min(SUMMARY_MAX_CHARS, budget_chars // 8)
    target = budget_chars * keep_fraction - overhead_chars - summary_limit
    kept, cut, kept_at_cut = 0, None, 0
    for i in range(len(messages) - 1, 0, -1):
        kept += message_chars(messages[i])
        if messages[i].role == "assistant":
            if cut is None or kept <= target:
                cut, kept_at_cut = i, kept  # the latest cut always; an earlier one while the tail fits
            if kept > target:
                break
    if cut is None:
        return None
    summary = digest(messages[:cut], summary_limit)
    after = overhead_chars + BLOCK_CHARS + len(summary) + kept_at_cut
    if tokens(after) >= tokens(before):  # compared as recorded: fewer characters can round up to as many tokens
        return None
    return Compacted(upto_message=cut, summary=summary, tokens_before=tokens(before), tokens_after=tokens(after))


def _clip(text: str, limit: int = _ENTRY_CHARS) -> str:
    """One line of at most `limit` characters. Cut between words (core.masking.cut_head): the summary is stored
    raw and masked when shown, and half a secret would not look like one."""
    flat = " ".join(cut_head(text, limit * 2).split())
    if len(flat) > limit or len(text) > limit * 2:
        return cut_head(flat, limit - 3) + "..."
    return flat


_LEFT_OUT = re.compile(r"- \.\.\. \((\d+) entries left out\)")


def _left_out(n: int) -> str:
    return f"- ... ({n} entries left out)"


def _entries(messages: Sequence[Message]) -> list[str | int]:
    """One line per prompt, answer and call; an int stands for that many entries an earlier summary left out."""
    results = {b.tool_use_id: b for m in messages if m.role == "user" for b in m.content
               if isinstance(b, ToolResultBlock)}
    entries: list[str | int] = []
    for m in messages:
        for b in m.content:
            if isinstance(b, TextBlock) and m.role == "user" and b.text.startswith(SUMMARY_HEADER):
                for line in b.text.splitlines()[1:]:  # an earlier summary: its entries carry on
                    left_out = _LEFT_OUT.fullmatch(line)
                    if left_out:
                        entries.append(int(left_out.group(1)))
                    elif line.strip():
                        entries.append(line)
            elif isinstance(b, TextBlock):
                entries.append(f"- {m.role}: {_clip(b.text)}")
            elif isinstance(b, ToolUseBlock):
                args = _clip(_json(b.input), 120)
                r = results.get(b.id)
                outcome = "no result" if r is None else ("error" if r.is_error else "ok")
                said = "" if r is None else f": {_clip(r.content, 160)}"
                entries.append(f"- called {b.name} {args} -> {outcome}{said}")
    return entries


def _lines(entries: Sequence[str | int]) -> list[str]:
    """Entries as lines, runs of left-out counts merged into one line."""
    lines: list[str] = []
    pending = 0
    for e in entries:
        if isinstance(e, int):
            pending += e
            continue
        if pending:
            lines.append(_left_out(pending))
            pending = 0
        lines.append(e)
    if pending:
        lines.append(_left_out(pending))
    return lines


def _size(e: str | int) -> int:
    return len(e if isinstance(e, str) else _left_out(e)) + 1


def digest(messages: Sequence[Message], limit: int = SUMMARY_MAX_CHARS) -> str:
    """A bounded, deterministic summary of `messages` (no model call)."""
    entries = _entries(messages)
    header = (f"{SUMMARY_HEADER} without a model call: {len(messages)} earlier messages; the full record stays in "
              "the session log.]")
    room = limit - len(header) - 60  # 60: the line that counts what was left out
    if sum(_size(e) for e in entries) <= room:
        return "\n".join([header, *_lines(entries)])
    head: list[str | int] = []
    used = 0
    for e in entries:  # the first third: how the conversation began
        if used + _size(e) > room // 3:
            break
        head.append(e)
        used += _size(e)
    tail: list[str | int] = []
    for e in reversed(entries[len(head):]):  # the rest: the most recent entries
        if used + _size(e) > room:
            break
        tail.append(e)
        used += _size(e)
    tail.reverse()
    middle = entries[len(head):len(entries) - len(tail)]
    omitted = sum(e if isinstance(e, int) else 1 for e in middle)
    return "\n".join([header, *_lines([*head, omitted, *tail])])
