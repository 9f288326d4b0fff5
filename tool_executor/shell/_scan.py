"""Scanning over quoted and nested text without reading it: where a `$(`, `${`, `"` or backquote ends, and the
value of an ANSI-C `$'...'` string. Nesting is bounded (MAX_NESTING) so that no input, however deep, can
exhaust the stack: past the bound a scanner answers TOO_DEEP and the reader treats the rest as unreadable."""

from __future__ import annotations

import re

MAX_NESTING = 32
"""How deep expansions inside expansions (`${a:-${b:-$(..)}}`) are looked into."""
ANSI_C = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
          "\\": "\\", "'": "'", '"': '"', "?": "?"}
TOO_DEEP = -2
"""What the scanners answer when quotes and substitutions nest deeper than MAX_NESTING."""


def balanced(s: str, i: int, open_: str, close: str, nesting: int = 0) -> int:
    """Index just past the `close` that balances the `open_` at `s[i]`, skipping quotes, escapes and
    backquotes; -1 when it is never closed, TOO_DEEP when nested too deep to follow."""
    if nesting > MAX_NESTING:
        return TOO_DEEP
    depth = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "$" and s.startswith("$'", i) and open_ != "{":
            i = ansi_c(s, i + 2, [])
            if i < 0:
                return -1
            continue
        if c == "'" and open_ != "{":
            end = s.find("'", i + 1)
            if end < 0:
                return -1
            i = end + 1
            continue
        if c == '"':
            i = skip_double(s, i + 1, nesting + 1)
            if i < 0:
                return i
            continue
        if c == "`":
            i = skip_backquote(s, i + 1)
            if i < 0:
                return -1
            continue
        if c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def double_paren_end(s: str, i: int) -> int:
    """Index past the `))` closing the `((` at `s[i]`, when both parentheses close together (arithmetic);
    -1 otherwise (`$((echo a) )` is a command substitution holding a subshell, as bash reads it)."""
    if not s.startswith("((", i):
        return -1
    end = balanced(s, i, "(", ")")
    inner = balanced(s, i + 1, "(", ")")
    return end if end > 0 and inner == end - 1 else -1


def skip_double(s: str, i: int, nesting: int = 0) -> int:
    """Index just past the `"` closing a double-quoted string whose text starts at `i`; -1 if unclosed."""
    if nesting > MAX_NESTING:
        return TOO_DEEP
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "`":
            i = skip_backquote(s, i + 1)
            if i < 0:
                return -1
        elif c == "$" and s.startswith("$(", i):
            i = balanced(s, i + 1, "(", ")", nesting + 1)
            if i < 0:
                return i
        elif c == "$" and s.startswith("${", i):
            i = balanced(s, i + 1, "{", "}", nesting + 1)
            if i < 0:
                return i
        else:
            i += 1
    return -1


def skip_backquote(s: str, i: int) -> int:
    n = len(s)
    while i < n:
        if s[i] == "\\":
            i += 2
        elif s[i] == "`":
            return i + 1
        else:
            i += 1
    return -1


def ansi_c(s: str, i: int, out: list[str]) -> int:
    """Decode `$'...'` whose text starts at `i`; index past the closing quote, or -1 if unclosed."""
    n = len(s)
    while i < n:
        c = s[i]
        if c == "'":
            return i + 1
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        i += 2
        if e in ANSI_C:
            out.append(ANSI_C[e])
        elif e in "01234567":
            digits = re.match(r"[0-7]{1,2}", s[i:i + 2])
            text = e + (digits.group() if digits else "")
            i += len(text) - 1
            out.append(chr(int(text, 8) & 0xFF))
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            digits = re.match(rf"[0-9A-Fa-f]{{1,{width}}}", s[i:i + width])
            if digits is None:
                out.append("\\" + e)
            else:
                i += len(digits.group())
                code = int(digits.group(), 16)
                out.append(chr(code) if code <= 0x10FFFF else "\ufffd")
        elif e == "c" and i < n:
            out.append(chr(ord(s[i]) & 0x1F))
            i += 1
        else:
            out.append("\\" + e)
    return -1


