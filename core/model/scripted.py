"""The scripted model: the offline default. Turn k of a session is answered by entry k of a JSON list, where k
is the number of assistant messages already in the session, so a resumed session continues where it stopped.
Past the end it answers with a short final text. A malformed script is a `ScriptError` naming the entry; the file
is read with a bound on nesting (core/bounded_json.py), so even a hostile file is one clear error.

The script is strict about its shape (and about ids repeating within it), not about what its turns say: an id's
alphabet, inputs of any depth or size, and text with unpaired surrogates reach the plan phase as a model's would
(core/proposal.py judges them), so a script can play a hostile model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core import bounded_json
from core.errors import ScriptError
from core.messages import ContentBlock, TextBlock, ToolUseBlock
from core.model.base import ModelAttempt, ModelListener, ModelRequest, ModelResponse
from core.regular_file import NotRegular, TooLarge, read_regular

FINAL_TEXT = "Done: the script has no more turns."
MAX_SCRIPT_BYTES = 64 * 1024 * 1024
"""A script file larger than this is refused unread: the loader never holds more (a daemon loads scripts for its
clients, and a path may name anything)."""

_TEXT_KEYS = {"type", "text"}
_TOOL_KEYS = {"type", "name", "input", "id"}


CHILD_MARK = "#child="
"""`script:PATH#child=0.1`: the turns of child 1 of child 0 of the script at PATH (agent/delegation.py)."""


def select_child(raw: Any, source: str, child: tuple[int, ...]) -> Any:
    """The turns a script gives the session at `child` (empty: the top level). A script is a list of turns, or an
    object `{"turns": [...], "children": [script, ...]}` whose children are scripts for the sessions it delegates
    to, in the order they start. A child the script does not have gets no turns (the final text at once)."""
    where = "top level"
    for index in child:
        children = raw.get("children", []) if isinstance(raw, dict) else []
        if not isinstance(children, list):
            raise ScriptError(source, "\"children\" must be a list of scripts", entry=where)
        where = f"child {index}" if where == "top level" else f"{where}.{index}"
        if index >= len(children):
            return []
        raw = children[index]
    if isinstance(raw, dict):
        extra = set(raw) - {"turns", "children"}
        if extra or "turns" not in raw:
            raise ScriptError(source, "a script object is {\"turns\": [...], \"children\": [...]}"
                              + (f"; unexpected keys {sorted(extra)}" if extra else ""), entry=where)
        return raw["turns"]
    return raw


def parse_script(raw: Any, source: str, child: tuple[int, ...] = ()) -> list[tuple[ContentBlock, ...]]:
    """Validate a decoded script strictly and turn it into content blocks with deterministic tool ids."""
    raw = select_child(raw, source, child)
    if not isinstance(raw, list):
        raise ScriptError(source, f"expected a JSON list of turns, got {type(raw).__name__}")
    turns: list[tuple[ContentBlock, ...]] = []
    seen_ids: set[str] = set()  # tool_use ids are unique in the whole script, as in a session
    for k, turn in enumerate(raw):
        where = f"turn {k}"
        if not isinstance(turn, list) or not turn:
            raise ScriptError(source, "a turn must be a non-empty list of content blocks", entry=where)
        blocks: list[ContentBlock] = []
        for j, block in enumerate(turn):
            at = f"{where}, block {j}"
            if not isinstance(block, dict):
                raise ScriptError(source, "a content block must be an object", entry=at)
            kind = block.get("type")
            if kind == "text":
                extra = set(block) - _TEXT_KEYS
                if extra or not isinstance(block.get("text"), str):
                    raise ScriptError(source, "a text block is {\"type\": \"text\", \"text\": string}"
                                      + (f"; unexpected keys {sorted(extra)}" if extra else ""), entry=at)
                blocks.append(TextBlock(text=block["text"]))
            elif kind == "tool_use":
                extra = set(block) - _TOOL_KEYS
                if extra:
                    raise ScriptError(source, f"unexpected keys {sorted(extra)} in a tool_use block", entry=at)
                name, args = block.get("name"), block.get("input", {})
                if not isinstance(name, str) or not name:
                    raise ScriptError(source, "a tool_use block needs a non-empty string \"name\"", entry=at)
                if not isinstance(args, dict):
                    raise ScriptError(source, "a tool_use block's \"input\" must be an object", entry=at)
                call_id = block.get("id", f"toolu_s{k:05d}_{j:02d}")
                if not isinstance(call_id, str) or not call_id or call_id in seen_ids:
                    raise ScriptError(source, "a tool_use \"id\" must be a unique non-empty string", entry=at)
                seen_ids.add(call_id)
                blocks.append(ToolUseBlock(id=call_id, name=name, input=args))
            else:
                raise ScriptError(source, f"unknown block type {kind!r} (expected \"text\" or \"tool_use\")",
                                  entry=at)
        turns.append(tuple(blocks))
    return turns


def _read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_SCRIPT_BYTES (core/regular_file.py: a FIFO nobody writes would
    hold the open, a device may never end)."""
    try:
        return read_regular(path, MAX_SCRIPT_BYTES)
    except NotRegular:
        raise ScriptError(str(path), "not a regular file") from None
    except TooLarge:
        raise ScriptError(str(path), f"larger than {MAX_SCRIPT_BYTES // (1024 * 1024)} MiB") from None


def load_script(path: Path, child: tuple[int, ...] = ()) -> list[tuple[ContentBlock, ...]]:
    try:
        text = _read_bounded(path).decode("utf-8")
    except OSError as exc:
        raise ScriptError(str(path), f"cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ScriptError(str(path), f"not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start})") from None
    try:
        raw = bounded_json.loads(text)
    except bounded_json.TooDeep as exc:
        raise ScriptError(str(path), f"not a script: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ScriptError(str(path), f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer longer than the interpreter converts
        raise ScriptError(str(path), f"not valid JSON ({exc})") from None
    return parse_script(raw, str(path), child)


class ScriptedModel:
    def __init__(self, turns: Sequence[tuple[ContentBlock, ...]], name: str = "script") -> None:
        self._turns = list(turns)
        self._name = name

    @classmethod
    def from_file(cls, path: Path, child: tuple[int, ...] = ()) -> ScriptedModel:
        mark = f"{CHILD_MARK}{'.'.join(map(str, child))}" if child else ""
        return cls(load_script(path, child), name=f"script:{path}{mark}")

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        """Answer turn `request.turn`; the listener sees each text block as one delta, then one ok attempt."""
        k = request.turn
        if k < len(self._turns):
            content = self._turns[k]
        else:
            content = (TextBlock(text=FINAL_TEXT),)
        has_tools = any(isinstance(b, ToolUseBlock) for b in content)
        response = ModelResponse(content=content, stop_reason="tool_use" if has_tools else "end_turn")
        if listener is not None:
            for block in content:
                if isinstance(block, TextBlock) and block.text:
                    listener.on_text(block.text)
            listener.on_attempt(ModelAttempt(number=1, outcome="ok", duration_ms=0.0,
                                             message=f"scripted turn {k}", usage=response.usage))
        return response
