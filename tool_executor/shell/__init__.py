"""Reading a bash command line for the policy check: which simple commands it runs, whether an allow pattern
may vouch for it, and where a deny pattern cannot see (README: Policy rules; Guarantees).

Our own conservative reader, not a shell: it never expands or runs anything, and says so where it cannot be
sure, rather than depend on a parser library whose idea of bash may differ from bash's. Its agreement with a
real parser is property-tested (tests/tool_executor/shell/)."""

from __future__ import annotations

from functools import lru_cache

from tool_executor.shell._forms import allow_text, deny_texts
from tool_executor.shell._reader import MAX_DEPTH, Reading, SimpleCommand, read

__all__ = ["MAX_DEPTH", "CommandLine", "Reading", "SimpleCommand", "read_command"]


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
