"""The plan phase's review of a model's answer, before any of it is committed.

A model's answer is untrusted input, and whatever of it is committed is replayed for ever: by every `fold`, in
every later request to the model, on every surface. So everything that must hold for the answer to be stored,
read back, shown and sent again is checked here, on the answer as a whole, and repaired or refused:

- text (each text block, each string of a tool input, keys included, tool names and ids) becomes valid UTF-8:
  unpaired surrogates are replaced by U+FFFD (core/utf8.py); a text block longer than `MAX_TEXT_CHARS` is cut;
- an id outside the API's alphabet (`^[a-zA-Z0-9_-]+$`), longer than `MAX_ID_CHARS`, that masking recognises as a
  secret, or that repeats an id of this answer or of any earlier turn of the session is renamed to a fresh id,
  in the assistant content and the planned call alike, so the conversation stays consistent. The original id is
  not kept; the note names only the first 16 hex digits of its sha256;
- a call whose input is nested deeper than `MAX_INPUT_DEPTH`, is larger than `MAX_INPUT_BYTES` as JSON, or holds a
  value JSON cannot carry (NaN, an infinity), whose tool name cannot be a tool name, or that comes after the
  first `MAX_CALLS_PER_BATCH` calls of the answer, is refused: it stays in the conversation (a tool_use needs its
  tool_result) and the `plan` check denies it before any other check runs, saying why. An input that cannot be
  kept is replaced by a placeholder object (`REMOVED_KEY`), in the conversation too; an invalid tool name by
  `INVALID_TOOL_NAME`.

Pure: no I/O, no clock; the session's ids, the id seed and the secret test are passed in."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from core.events import PlannedCall, planned_call
from core.hashing import canonical_json, sha256_text
from core.messages import ContentBlock, TextBlock, ToolResultBlock, ToolUseBlock
from core.record import record
from core.utf8 import unpaired_surrogates, valid_text

MAX_CALLS_PER_BATCH = 64
"""Calls taken from one answer; later ones are refused (the model may propose them again next turn)."""
MAX_INPUT_DEPTH = 64
"""Nesting of a tool input (the input object itself is level 1)."""
MAX_INPUT_BYTES = 1024 * 1024
"""Size of a tool input as canonical JSON, in UTF-8 bytes."""
MAX_TEXT_CHARS = 1024 * 1024
"""Characters of one text block of an answer; the rest is cut, with a note in the text."""
MAX_ID_CHARS = 64
"""Characters of a tool-use id; a longer one is renamed."""

SAFE_ID = re.compile(r"[a-zA-Z0-9_-]+")
"""The alphabet the Messages API requires of tool-use ids (`^[a-zA-Z0-9_-]+$`)."""
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""What a tool name can be (the API's pattern for tool names)."""
INVALID_TOOL_NAME = "invalid_tool_name"
REMOVED_KEY = "removed_by_strata"


@record
class Review:
    """An answer as it may be committed: its content and planned calls, and what was repaired or refused, one
    line each (for the timeline: no raw id, no input)."""

    content: tuple[ContentBlock, ...]
    calls: tuple[PlannedCall, ...]
    notes: tuple[str, ...]


def review(content: Sequence[ContentBlock], *, used_ids: Container[str], id_seed: str,
           looks_secret: Callable[[str], bool] | None = None) -> Review:
    """Review one answer. `used_ids`: the ids of every call of the session so far; `id_seed`: a string unique to
    this answer (the batch id), from which fresh ids are derived; `looks_secret`: whether masking would hide a
    string."""
    kept: set[str] = set()
    secret = looks_secret or (lambda _: False)

    def taken(call_id: str) -> bool:
        return call_id in kept or call_id in used_ids

    blocks: list[ContentBlock] = []
    calls: list[PlannedCall] = []
    notes: list[str] = []
    surrogates = 0
    dropped = 0
    position = 0
    for block in content:
        if isinstance(block, ToolResultBlock):
            dropped += 1  # an assistant message cannot hold one; the API would refuse every later request
            continue
        if isinstance(block, TextBlock):
            text = block.text
            bad = unpaired_surrogates(text)
            if bad:
                surrogates += bad
                text = valid_text(text)
            if len(text) > MAX_TEXT_CHARS:
                notes.append(f"cut a text block of {len(text)} characters to {MAX_TEXT_CHARS}")
                text = (text[:MAX_TEXT_CHARS] + f"\n[{len(text) - MAX_TEXT_CHARS} more characters cut by Strata: a "
                        f"text block holds at most {MAX_TEXT_CHARS}]")
            blocks.append(block if text is block.text else TextBlock(text=text))
            continue
        position += 1
        refused: list[str] = []
        name, bad = block.name, unpaired_surrogates(block.name)
        if bad:
            surrogates += bad
            name = valid_text(name)
        if not TOOL_NAME.fullmatch(name):
            refused.append(f"its tool name is not a valid tool name (1 to 64 letters, digits, _ or -); it was "
                           f"replaced by {INVALID_TOOL_NAME} in the conversation")
            name = INVALID_TOOL_NAME
        call_id, why = block.id, _rename_reason(block.id, taken, secret)
        if why is not None:
            call_id = _fresh_id(id_seed, position, taken)
            notes.append(f"call {call_id}: id renamed ({why}; sha256 of the original "
                         f"{sha256_text(valid_text(block.id))[:16]})")
        kept.add(call_id)
        args, canonical, problem, bad = _input(block.input)
        surrogates += bad
        if problem is not None:
            refused.append(f"its input {problem}; the input was replaced by a placeholder in the conversation")
            args = {REMOVED_KEY: f"the input {problem}"}
            canonical = canonical_json(args)
        if position > MAX_CALLS_PER_BATCH:
            refused.append(f"only the first {MAX_CALLS_PER_BATCH} calls of one answer are taken and this is call "
                           f"{position}; propose it again in a later turn if it is still needed")
        for reason in refused:
            notes.append(f"call {call_id}: refused, {reason}")
        if call_id is block.id and name is block.name and args is block.input:
            blocks.append(block)
        else:
            blocks.append(ToolUseBlock(id=call_id, name=name, input=args))
        calls.append(planned_call(call_id, name, args, sha256_text(canonical), tuple(refused)))
    if surrogates:
        notes.append(f"replaced {surrogates} unpaired surrogate(s) with U+FFFD")
    if dropped:
        notes.append(f"dropped {dropped} tool_result block(s): an assistant message cannot hold one")
    return Review(content=tuple(blocks), calls=tuple(calls), notes=tuple(notes))


def _rename_reason(call_id: str, taken: Callable[[str], bool], looks_secret: Callable[[str], bool]) -> str | None:
    if not SAFE_ID.fullmatch(call_id):
        return "not in the API's id alphabet"
    if len(call_id) > MAX_ID_CHARS:
        return f"longer than {MAX_ID_CHARS} characters"
    if taken(call_id):
        return "already used in this session"
    if looks_secret(call_id):
        return "it looks like a secret"
    return None


def _fresh_id(seed: str, position: int, taken: Callable[[str], bool]) -> str:
    """`toolu_` and 24 hex digits derived from the answer's seed and the call's position: shaped like the API's
    own ids, and deterministic (another try only if the model happened to use exactly this id)."""
    attempt = 0
    while True:
        call_id = "toolu_" + sha256_text(f"{seed}:{position}:{attempt}")[:24]
        if not taken(call_id):
            return call_id
        attempt += 1


def input_problem(value: Mapping[str, Any]) -> str | None:
    """Why a call's input from elsewhere than a model's answer (a hook's rewrite) cannot be kept as it is: the
    limits above, or text that is not valid UTF-8, which is refused here, never repaired. None: it can be kept."""
    _, _, problem, surrogates = _input(dict(value))
    if problem is None and surrogates:
        problem = f"holds text that is not valid UTF-8 ({surrogates} unpaired surrogate(s))"
    return problem


def _input(value: dict[str, Any]) -> tuple[dict[str, Any], str, str | None, int]:
    """(the input with valid text, its canonical JSON, why it cannot be kept or None, unpaired surrogates found).
    Walked iteratively and never below `MAX_INPUT_DEPTH`, so any depth is judged without recursion."""
    surrogates = 0
    nonfinite = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict or kind is list or kind is tuple:
            if depth > MAX_INPUT_DEPTH:
                return value, "", f"is nested more than {MAX_INPUT_DEPTH} levels deep (the limit)", surrogates
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return value, "", f"has a key that is not a string ({type(key).__name__})", surrogates
                    surrogates += unpaired_surrogates(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif kind is str:
            surrogates += unpaired_surrogates(item)
        elif kind is float:
            nonfinite = nonfinite or not math.isfinite(item)
        elif not (kind is int or kind is bool or item is None):
            return value, "", f"holds a value JSON cannot carry ({kind.__name__})", surrogates
    if nonfinite:
        return value, "", "holds NaN or an infinity, which JSON cannot carry", surrogates
    if surrogates:
        value = _repaired(value)
    canonical = canonical_json(value)
    if len(canonical) > MAX_INPUT_BYTES // 4:  # a character is at most 4 bytes: only a long one is measured
        size = len(canonical.encode("utf-8"))
        if size > MAX_INPUT_BYTES:
            return value, canonical, f"is {size} bytes as JSON, over the limit of {MAX_INPUT_BYTES}", surrogates
    return value, canonical, None, surrogates


def _repaired(value: Any) -> Any:
    """`value` with every string (keys too) as valid UTF-8. Recursive: only called within the depth limit."""
    kind = type(value)
    if kind is str:
        return valid_text(value)
    if kind is dict:
        return {valid_text(k): _repaired(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_repaired(v) for v in value]
    return value
