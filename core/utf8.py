"""Text as valid UTF-8. A Python string may hold unpaired surrogates (`\\ud800`): JSON's `\\uXXXX` escapes decode
to them, and so do file names and arguments read with `surrogateescape`. Such a string cannot be encoded as UTF-8,
so it can be neither stored nor sent to a model, and one of them in a committed event would wedge the session.
Text that crosses into Strata from outside (a model's answer, a tool's output) is repaired here, once: each
unpaired surrogate becomes U+FFFD, and a high and low surrogate that stand together become the character they
encode."""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def unpaired_surrogates(text: str) -> int:
    """How many unpaired surrogates `text` holds (0 for text that is valid UTF-8, the usual case, found in C)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return valid_text(text).count(REPLACEMENT) - text.count(REPLACEMENT)
    return 0


def valid_text(text: str) -> str:
    """`text` with every unpaired surrogate replaced by U+FFFD; valid text is returned as it is, unchanged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass joins each high+low pair into one character; what is left alone is replaced.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


class TextStream:
    """Repairs text that arrives in pieces (streamed deltas): a high surrogate at the end of a piece is held back
    until the next piece shows whether its low half follows, so a pair split across two pieces is joined, not
    replaced twice."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        if text and "\ud800" <= text[-1] <= "\udbff":
            text, self._held = text[:-1], text[-1]
        return valid_text(text)

    def flush(self) -> str:
        """What is still held back (an unpaired high surrogate, repaired), at the end of the stream."""
        text, self._held = self._held, ""
        return valid_text(text)
