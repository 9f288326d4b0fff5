"""A command line as the policy check reads it: read once (cached), with the texts each kind of pattern is matched
against."""

from __future__ import annotations

from functools import lru_cache

from tool_executor.shell._forms import allow_text, deny_texts
from tool_executor.shell._reader import read


class CommandLine:
    """A command line as read once, with the texts each kind of pattern is matched against."""

    __slots__ = ("allow_text", "deny_texts", "reading", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.reading = read(text)
        self.allow_text = allow_text(self.reading)
        self.deny_texts = deny_texts(text, self.reading)


@lru_cache(maxsize=256)
def read_command(text: str) -> CommandLine:
    """Cached: the policy check reads the same command once per rule, and again after a hook rewrite."""
    return CommandLine(text)
