"""What an "always" answer allows from now on, said exactly, and its narrower form for a command.

"Always" without a pattern approves every later call of the tool that the same rule or hook asks about, for the
rest of the session. Where the tool's main argument is a command read with certainty as one simple command, a
narrower "always" can be offered first: commands with the same first word (`git *`), matched as an allow rule's
pattern is (tool_executor/checks/policy.py: a compound or unclear command never matches one)."""

from __future__ import annotations

_GLOB = set("*?[]")


def command_pattern(allow_text: str | None) -> str | None:
    """The narrower "always" for a command whose allow form is `allow_text` (`git status -s` -> `git *`), or None
    (no command read with certainty, or a first word that would itself be a glob)."""
    if not allow_text or not allow_text.strip():
        return None
    word = allow_text.split()[0]
    if _GLOB & set(word):
        return None
    return f"{word} *"


def always_means(tool: str, pattern: str | None = None) -> str:
    """What an "always" grant allows, in words a person can check (the asking rule is named beside it)."""
    what = f"{tool} commands matching `{pattern}`" if pattern is not None else f"every {tool} call"
    return f"{what}, for the rest of this session, when the same rule asks"
