"""Generated bash command lines that know what they run: each line is built from a small grammar (words in every
quoting style, assignments, wrappers with options, `bash -c` bodies, substitutions, redirections, operators and
compound commands), and carries its ground truth: every simple command it can run, at any depth, and whether
it is exactly one plain simple command (the only shape an allow pattern may vouch for)."""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from hypothesis import strategies as st

NAMES = ("ls", "rm", "git", "make", "cat", "grep", "touch", "xx")
"""Command words; none is a bash builtin or keyword, so real bash looks each up on PATH."""
T = TypeVar("T")
SAFE = string.ascii_letters + string.digits + "-._/=:,+@%"
SPECIAL = " ;|&$`'\"*?[]{}~#()<>\\\t\n!^"


@dataclass(frozen=True)
class Command:
    words: tuple[str | None, ...]
    """Values bash gives the words; None for one that is expanded."""


@dataclass(frozen=True)
class Line:
    text: str
    commands: tuple[Command, ...]
    """Every simple command the line can run, nested ones included."""
    plain: bool
    """Exactly one simple command: no operator, assignment, wrapper, redirection or expansion, its command word
    written without quotes or escapes."""

    @property
    def single(self) -> tuple[str, ...] | None:
        if not self.plain:
            return None
        (command,) = self.commands
        assert None not in command.words
        return tuple(w for w in command.words if w is not None)


# -- literal words in every quoting style ------------------------------------------------------------------------

def _single(chunk: str) -> str | None:
    return None if "'" in chunk else f"'{chunk}'"


def _double(chunk: str) -> str:
    return '"' + "".join("\\" + c if c in '\\$`"' else c for c in chunk) + '"'


def _backslash(chunk: str) -> str | None:
    if "\n" in chunk:
        return None  # backslash-newline is a line continuation, not a newline
    return "".join("\\" + c if c not in SAFE else c for c in chunk)


def _ansi(chunk: str) -> str:
    table = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t"}
    return "$'" + "".join(table.get(c, c) for c in chunk) + "'"


def _plain(chunk: str) -> str | None:
    return chunk if chunk and all(c in SAFE for c in chunk) else None


STYLES = {"plain": _plain, "single": _single, "double": _double, "backslash": _backslash, "ansi": _ansi}


_CUTS = st.integers(1, 8)
_PICK = st.integers(0, 1 << 16)


def _pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """One of `options` (cheaper than building a new `sampled_from` strategy at every draw)."""
    return options[draw(_PICK) % len(options)]


def quoted(draw: st.DrawFn, value: str, ansi: bool = True) -> str:
    """`value` written as bash would read it back exactly, in randomly mixed quoting styles."""
    out: list[str] = []
    rest = value
    while rest:
        cut = min(draw(_CUTS), len(rest))
        chunk, rest = rest[:cut], rest[cut:]
        out.append(_pick(draw, [r for s, f in STYLES.items() if (ansi or s != "ansi") and (r := f(chunk)) is not None]))
    return "".join(out)


_LITERAL = st.text(st.sampled_from(SAFE + SPECIAL), min_size=1, max_size=8)
_MAYBE_EMPTY = st.text(st.sampled_from(SAFE + SPECIAL), max_size=8)


def literals(min_size: int = 1) -> st.SearchStrategy[str]:
    return _LITERAL if min_size else _MAYBE_EMPTY


# -- simple commands ---------------------------------------------------------------------------------------------

EXPANDED = ("$HOME", "${x}", "$x", "$((1+2))", "*.py", "a?", "{a,b}", "~/x", '"$x"', "$1")
REDIRECTIONS = ("> out", "2>&1", "< in", ">> log", "2>/dev/null", "<<< x")
WRAPPERS = ("env -i", "env -u HOME", "env FOO=1", "env --", "nice -n 5", "nice", "timeout 5",
            "timeout -s KILL 5", "command -p", "command", "nohup", "stdbuf -o0", "setsid", "sudo -u root",
            "xargs -n 1", "xargs", "exec", "builtin")


@dataclass(frozen=True)
class _Part:
    text: str
    words: tuple[str | None, ...]
    nested: tuple[Command, ...]
    plain: bool


@st.composite
def argument(draw: st.DrawFn, depth: int, ansi: bool) -> _Part:
    kind = _pick(draw, ["literal"] * 6 + ["expanded"] + ["substitution"] * (depth > 0))
    if kind == "literal":
        value = draw(literals())
        if value.startswith("#") or value.startswith("~"):
            value = "a" + value
        return _Part(quoted(draw, value, ansi), (value,), (), True)
    if kind == "expanded":
        return _Part(_pick(draw, EXPANDED), (None,), (), False)
    inner = draw(line(depth - 1, ansi))
    # Backquotes change backslashes inside them: only around text that has none.
    backquotes = ["`{}`"] if not any(c in inner.text for c in "\\`") else []
    form = _pick(draw, ["$( {} )", "\"$( {} )\"", "<( {} )", *backquotes])
    return _Part(form.format(inner.text), (None,), inner.commands, False)


@st.composite
def command_word(draw: st.DrawFn, name: str) -> tuple[str, str, bool]:
    """(as written, value, plain)."""
    style = _pick(draw, ["plain"] * 4 + ["path", "single", "escape", "double"])
    if style == "path":
        value = _pick(draw, ["/bin/", "/usr/bin/", "./"]) + name
        return value, value, True
    if style == "single":
        return f"'{name[0]}'{name[1:]}", name, False
    if style == "escape":
        return f"{name[0]}\\{name[1:]}", name, False
    if style == "double":
        return f'"{name}"', name, False
    return name, name, True


@st.composite
def simple(draw: st.DrawFn, depth: int, ansi: bool = True) -> Line:
    name = _pick(draw, NAMES)
    written, value, plain = draw(command_word(name))
    args = draw(_arguments(depth, ansi))
    text = " ".join([written, *(a.text for a in args)])
    words = (value, *(w for a in args for w in a.words))
    nested = tuple(c for a in args for c in a.nested)
    plain = plain and all(a.plain for a in args)
    core = Line(text, (Command(words), *nested), plain)
    shape = _pick(draw, ["bare"] * 6 + ["assigned", "wrapped", "redirected", "shell", "find"])
    if shape == "bare":
        return core
    if shape == "assigned":
        target = _pick(draw, [*NAMES, "x", "lsX", "PATH"])
        value_text = quoted(draw, draw(literals(0)), ansi) if draw(st.booleans()) else ""
        return Line(f"{target}={value_text} {text}", core.commands, False)
    if shape == "redirected":
        return Line(f"{text} {_pick(draw, REDIRECTIONS)}", core.commands, False)
    if shape == "wrapped":
        wrapper = _pick(draw, WRAPPERS)
        outer = Command((*wrapper.split(), *words))
        return Line(f"{wrapper} {text}", (outer, *core.commands), False)
    if shape == "find":
        outer = Command(("find", ".", "-exec", *words, "{}", ";"))
        return Line(f"find . -exec {text} {{}} \\;", (outer, *core.commands), False)
    shell = _pick(draw, ["bash -c", "sh -c", "bash -ec", "bash --norc -c"])
    body = quoted(draw, text, ansi)
    outer = Command((*shell.split(), text))
    return Line(f"{shell} {body}", (outer, *core.commands), False)


@lru_cache
def _arguments(depth: int, ansi: bool) -> st.SearchStrategy[list[_Part]]:
    return st.lists(argument(depth, ansi), max_size=4)


@lru_cache
def _simples(depth: int, ansi: bool) -> st.SearchStrategy[list[Line]]:
    return st.lists(simple(depth, ansi), min_size=1, max_size=3)


@lru_cache
@st.composite
def line(draw: st.DrawFn, depth: int = 2, ansi: bool = True) -> Line:
    parts = draw(_simples(depth, ansi))
    ops = [_pick(draw, [";", " && ", " || ", " | ", "\n", " & "]) for _ in parts[1:]]
    text = parts[0].text
    for op, part in zip(ops, parts[1:], strict=True):
        text += op + part.text
    commands = tuple(c for p in parts for c in p.commands)
    plain = len(parts) == 1 and parts[0].plain
    shape = _pick(draw, ["bare"] * 6 + ["if", "group", "subshell", "while", "for", "function"])
    if shape == "bare":
        return Line(text, commands, plain)
    true = Command(("true",))
    wrapped = {
        "if": (f"if true; then {text}; fi", (true, *commands)),
        "group": (f"{{ {text}; }}", commands),
        "subshell": (f"( {text} )", commands),
        "while": (f"while true; do {text}; done", (true, *commands)),
        "for": (f"for i in a b; do {text}; done", commands),
        "function": (f"f() {{ {text}; }}", commands),
    }[shape]
    return Line(wrapped[0], wrapped[1], False)


def plain_commands(ansi: bool = True) -> st.SearchStrategy[Line]:
    """Lines that are one plain simple command (what an allow pattern may vouch for)."""

    @st.composite
    def build(draw: st.DrawFn) -> Line:
        name = _pick(draw, NAMES)
        values = draw(st.lists(literals(), max_size=4))
        values = ["a" + v if v[:1] in ("#", "~") else v for v in values]
        text = " ".join([name, *(quoted(draw, v, ansi) for v in values)])
        return Line(text, (Command((name, *values)),), True)

    return build()
