"""The texts a bash pattern is matched against.

- An allow pattern meets one text: the single simple command read with certainty, its words joined by spaces,
  each word plain when it needs no quoting and in single quotes otherwise (`ls 'a b'`, never the ambiguous
  `ls a b`). The command word is as written: `/tmp/x/ls` does not meet `ls*`.
- A deny or ask pattern meets many: every simple command read (as written, and with the command word cut to
  its basename, so `/bin/rm` meets `rm*`), plus a net of text fragments: the whole line and its pieces cut at
  every operator and substitution character, with leading keywords, prefixes and assignments dropped. The net
  is how patterns were matched before the reader existed; it stays so that a deny pattern never matches less
  than it did (it still catches, say, `rm` written inside a value that `${x@P}` would run)."""

from __future__ import annotations

import re

from tool_executor.shell._reader import Reading, SimpleCommand

_SAFE = re.compile(r"[\w@%+=:,./-]+")
_CUT = re.compile(r"[;&|\n`<>()$]+")
_PREFIXES = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
                       "select", "function", "coproc", "!", "{", "}", "time", "exec", "command", "builtin", "env",
                       "nohup", "nice", "sudo"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


def _quote(word: str) -> str:
    return word if _SAFE.fullmatch(word) else "'" + word.replace("'", "'\\''") + "'"


def allow_text(reading: Reading) -> str | None:
    if reading.single is None:
        return None
    return " ".join(_quote(w) for w in reading.single.words)


def _command_texts(command: SimpleCommand) -> list[str]:
    texts = [" ".join(command.words)]
    if "/" in command.words[0]:
        texts.append(" ".join((command.name, *command.words[1:])))
    return texts


def _fragments(text: str) -> list[str]:
    parts = [p.strip() for p in _CUT.split(text) if p.strip()]
    out = [text.strip(), *parts]
    for part in parts:
        words = part.split()
        while words and (words[0] in _PREFIXES or _ASSIGNMENT.fullmatch(words[0])):
            words = words[1:]
        if words:
            words[0] = words[0].replace("\\", "").replace("'", "").replace('"', "")
        bare = " ".join(words)
        if bare and bare != part:
            out.append(bare)
    return out


def deny_texts(text: str, reading: Reading) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for command in reading.commands:
        for form in _command_texts(command):
            seen.setdefault(form)
    for form in _fragments(text):
        seen.setdefault(form)
    return tuple(seen)
