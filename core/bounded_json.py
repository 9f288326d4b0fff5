"""Reading JSON from outside (a script file, a model's streamed tool input) with a bound on nesting. Python's
decoder recurses once per level, so a document nested a few thousand levels deep raises RecursionError, which
no caller expects; well below that, values too deep for pydantic's serializer would pass and fail later. The
nesting is measured first, in one linear scan that skips over strings, and a document past the bound is
refused with `TooDeep` (a ValueError, so callers that handle malformed JSON handle this too)."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_JSON_DEPTH = 512
"""The deepest nesting a reader accepts: far below the interpreter's recursion limit, far above any real tool
input (the plan phase allows much less, see core/proposal.py, and says so to the model)."""

_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def depth_exceeds(text: str, limit: int) -> bool:
    """Whether `text`, read as JSON, nests arrays and objects more than `limit` levels deep. Strings are removed
    first (brackets inside them do not count); the running depth over what is left is computed in C."""
    if text.count("[") + text.count("{") <= limit:  # not enough brackets to be that deep: the usual case
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def loads(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads`, refusing (TooDeep) a document nested more than `max_depth` levels."""
    if depth_exceeds(text, max_depth):
        raise TooDeep(max_depth)
    return json.loads(text)
