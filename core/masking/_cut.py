"""Cutting text that is masked later (stored raw, masked when shown), so that a cut never turns a secret into text
the detectors no longer recognise."""

from __future__ import annotations

import re

from core.masking._detectors import _triggers

_PUNCTUATION_ONLY = re.compile(r"[^\w\s]+")


def cut_head(text: str, limit: int) -> str:
    """`text[:limit]` for text that is masked after it is cut (stored raw, masked when shown): a token split by
    the cut is dropped whole, because a secret's first half no longer looks like a secret (`ghp_` and 29
    characters is not a GitHub token to the detectors). A key block's beginning left without its end is still
    recognised, so nothing else is needed."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and not text[end].isspace() and not text[end - 1].isspace():
        end -= 1
    return text[:end]


def cut_tail(text: str, limit: int) -> str:
    """`text[-limit:]` for text masked after it is cut: the token split by the cut is dropped, and so is the next
    word, since its key may have been cut off (`pass|word = x`); and while a dropped word could be a key itself
    (punctuation, a trigger word, a trailing `:` or `=`: `Bearer x`, `Authorization: Bearer x`), the word after
    it goes too. A key block's body left without its BEGIN line is recognised by its END line."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    n = len(text)
    while start < n and not text[start].isspace() and not text[start - 1].isspace():
        start += 1  # the rest of a split token
    while True:
        while start < n and text[start].isspace():
            start += 1
        end = start
        while end < n and not text[end].isspace():
            end += 1
        word = text[start:end]
        start = end
        if not word or not (_PUNCTUATION_ONLY.fullmatch(word) or word.endswith((":", "=")) or _triggers(word.lower())):
            break
    return text[start:]
