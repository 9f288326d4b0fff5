"""From a bash command line to the simple commands it runs, with an honest account of what could not be read.

Two questions are answered, for two kinds of rule:
- may an allow pattern vouch for this line? Only when the whole line is one simple command read with certainty:
  no operator, redirection, expansion, assignment, keyword or line continuation, and a command word written
  plainly that does not run another command (`env`, `bash`, `eval`, ...). Otherwise `uncertain` says why.
- which commands could run? Every simple command seen anywhere: after keywords and assignments, inside
  substitutions, through wrappers (`env -i rm`), in `bash -c` / `sh -c` bodies and `eval` (read again, up to
  MAX_DEPTH levels), as `find -exec` and `xargs` commands. Where a command word cannot be read at all (an
  expansion, `eval`, `source`, a shell reading standard input), `opaque` says where; a deny pattern cannot be
  relied on there, so the policy asks."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.record import record
from tool_executor.shell._lexer import Arithmetic, Lexed, Op, Redirection, Token, Word, lex
from tool_executor.shell._scan import MAX_NESTING
from tool_executor.shell._wrappers import SHELLS, WRAPPERS, find_actions, shell_call, unwrap

MAX_DEPTH = 8
"""How deep `bash -c`, `eval` and substitution bodies are read again."""
MAX_REASONS = 4
"""Reasons kept of each kind: the first few say enough, and a reason list stays short."""
MAX_COMMANDS = 256
"""How many simple commands one line may yield before the rest counts as unreadable."""

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}",
                       "esac", "coproc"})
_NOT_COMMANDS = frozenset({"for", "select", "case", "[["})
"""Keywords whose segment holds words, not a command (`for x in a b`, `case $x in`, `[[ -f x ]]`)."""
_CASE_SEPARATORS = frozenset({";;", ";&", ";;&"})
_EVALUATORS = frozenset({"eval", "source", ".", "alias", "trap", "let"})
_CALLBACKS = frozenset({"mapfile", "readarray", "compgen", "complete", "fc", "enable"})
"""Builtins that can run a command or load code named in an argument (`mapfile -C`, `enable -f`)."""
_RUNNERS = frozenset(WRAPPERS) | SHELLS | _EVALUATORS | _CALLBACKS
"""Command words that run a command given in their arguments: an allow pattern never vouches for these."""
_READABLE_IN_COMMAND_WORD = frozenset({"tilde"})


@record
class SimpleCommand:
    words: tuple[str, ...]
    """The command word first, then its arguments, quoting resolved."""

    @property
    def name(self) -> str:
        return os.path.basename(self.words[0]) if self.words else ""


@record
class Reading:
    commands: tuple[SimpleCommand, ...]
    """Every simple command seen, nested and unwrapped ones included, in the order met."""
    single: SimpleCommand | None
    """The line's one simple command, when it was read with certainty (then `uncertain` is empty)."""
    uncertain: tuple[str, ...]
    """Why no allow pattern may apply to the line."""
    opaque: tuple[str, ...]
    """Where a command the line may run could not be read."""
    invalid: str | None = None
    """Why bash cannot take the text at all (a NUL byte)."""


@dataclass
class _Acc:
    commands: list[SimpleCommand] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    uncertain: list[str] = field(default_factory=list)

    def note_opaque(self, why: str, speculative: bool) -> None:
        if not speculative and why not in self.opaque and len(self.opaque) < MAX_REASONS:
            self.opaque.append(why)

    def note_uncertain(self, why: str) -> None:
        if why not in self.uncertain and len(self.uncertain) < MAX_REASONS:
            self.uncertain.append(why)


def shown(text: str, limit: int = 40) -> str:
    """A piece of the command as a reason quotes it: on one line, and short."""
    one_line = text.replace("\n", "\\n")
    return one_line if len(one_line) <= limit else one_line[:limit - 3] + "..."


def read(text: str) -> Reading:
    if "\x00" in text:
        return Reading((), None, ("it holds a NUL byte",), (), "it holds a NUL byte, which bash cannot take")
    acc = _Acc()
    lexed = lex(text)
    single = _read_line(lexed, acc, depth=0, speculative=False, top=True)
    if acc.uncertain:
        single = None
    return Reading(tuple(acc.commands), single, tuple(acc.uncertain), tuple(acc.opaque))


def _read_text(text: str, acc: _Acc, depth: int, speculative: bool, where: str) -> None:
    if depth > MAX_DEPTH:
        acc.note_opaque(f"{where} is nested more than {MAX_DEPTH} levels deep", speculative)
        return
    if "\x00" in text:
        acc.note_opaque(f"{where} holds a NUL byte", speculative)
        return
    _read_line(lex(text), acc, depth, speculative, top=False)


def _read_line(lexed: Lexed, acc: _Acc, depth: int, speculative: bool, top: bool) -> SimpleCommand | None:
    """Read every segment (the tokens between two operators); returns the line's only simple command, if it has
    exactly one."""
    if lexed.too_deep:
        acc.note_opaque(f"expansions are nested more than {MAX_NESTING} levels deep", speculative)
    if top:
        for problem in lexed.problems:
            acc.note_uncertain(f"it has {problem}")
        if lexed.continued:
            acc.note_uncertain("it has a line continuation (backslash-newline)")
        if any(isinstance(t, Op) for t in lexed.tokens):
            acc.note_uncertain("it is more than one simple command (; & | && || ( ) or a newline)")
    segments: list[tuple[list[Token], str]] = [([], "")]
    for token in lexed.tokens:
        if isinstance(token, Op):
            segments[-1] = (segments[-1][0], token.text)
            segments.append(([], ""))
        else:
            segments[-1][0].append(token)
    found: list[SimpleCommand] = []
    pattern_next = False
    for k, (tokens, ended_by) in enumerate(segments):
        words = [t for t in tokens if isinstance(t, Word)]
        first = words[0].value if words and not words[0].quoted else ""
        skip = pattern_next and ended_by in (")", "|")  # case patterns: `a|b)`
        # A function definition's header `name ()`: the name is not a command.
        skip = skip or (ended_by == "(" and len(words) == 1 and k + 1 < len(segments)
                        and segments[k + 1] == ([], ")"))
        found.extend(_read_segment(tokens, acc, depth, speculative, top, skip=skip))
        if first == "case":
            pattern_next = ended_by != ")"
        elif ended_by in _CASE_SEPARATORS or (pattern_next and ended_by == "|"):
            pattern_next = True
        elif tokens or ended_by not in ("\n", "("):
            pattern_next = False
    return found[0] if top and len(found) == 1 else None


def _read_segment(tokens: Sequence[Token], acc: _Acc, depth: int, speculative: bool, top: bool,
                  skip: bool) -> list[SimpleCommand]:
    words: list[Word] = []
    redirections: list[Redirection] = []
    for token in tokens:
        if isinstance(token, Word):
            words.append(token)
        elif isinstance(token, Redirection):
            redirections.append(token)
        elif isinstance(token, Arithmetic):
            if top:
                acc.note_uncertain("it is an arithmetic command `((...))`")
            for body in token.bodies:
                _read_text(body, acc, depth + 1, speculative, "a command substitution")
    for word in [*words, *(r.target for r in redirections if r.target), *(r.body for r in redirections if r.body)]:
        for body in word.bodies:
            _read_text(body, acc, depth + 1, speculative, "a command substitution")
        for why in word.hidden:
            acc.note_opaque(why, speculative)
        if top and word.expansions:
            acc.note_uncertain(f"`{shown(word.raw)}` is expanded by the shell ({', '.join(sorted(word.expansions))})")
    if top and redirections:
        acc.note_uncertain("it has a redirection or a here-document")
    if skip or not words:
        return []
    i = 0
    while i < len(words) and not words[i].quoted and words[i].value in _RESERVED:
        i += 1
    if top and i:
        acc.note_uncertain(f"it starts with the shell keyword `{words[0].value}`")
    if i < len(words) and not words[i].quoted and words[i].value in _NOT_COMMANDS:
        if top:
            acc.note_uncertain(f"it is a `{words[i].value}` compound command")
        return []
    if i < len(words) and not words[i].quoted and words[i].value == "function":
        if top:
            acc.note_uncertain("it defines a function")
        i += 2
        while i < len(words) and not words[i].quoted and words[i].value in _RESERVED:
            i += 1
    start = i
    while i < len(words) and _ASSIGNMENT.match(words[i].raw):
        i += 1
    if top and i > start:
        acc.note_uncertain(f"an assignment (`{shown(words[start].raw)}`) comes before the command word")
    rest = words[i:]
    if not rest:
        return []
    if top:
        word = rest[0]
        if word.quoted:
            acc.note_uncertain(f"its command word `{shown(word.raw)}` is spelled with quotes or escapes")
        elif os.path.basename(word.value) in _RUNNERS:
            acc.note_uncertain(f"its command word `{shown(word.value)}` runs another command")
        elif word.value == "find" and find_actions(rest[1:]):
            acc.note_uncertain("`find -exec` runs another command")
    before = len(acc.commands)
    _read_command(tuple(rest), redirections, acc, depth, speculative)
    return acc.commands[before:before + 1]


def _read_command(words: tuple[Word, ...], redirections: Sequence[Redirection], acc: _Acc, depth: int,
                  speculative: bool) -> None:
    if len(acc.commands) >= MAX_COMMANDS:
        acc.note_opaque(f"it holds more than {MAX_COMMANDS} commands", speculative)
        return
    head = words[0]
    acc.commands.append(SimpleCommand(tuple(w.value for w in words)))
    unreadable = head.expansions - _READABLE_IN_COMMAND_WORD
    if unreadable:
        acc.note_opaque(f"the command word `{shown(head.raw)}` is only known when the shell expands it", speculative)
        return
    name = os.path.basename(head.value)
    args = words[1:]
    if name in SHELLS:
        _read_shell(name, args, redirections, acc, depth, speculative)
    elif name in ("eval", "source", "."):
        acc.note_opaque(f"`{name}` runs commands that are not written on the line itself", speculative)
        if name == "eval" and args and not any(a.expansions for a in args):
            _read_text(" ".join(a.value for a in args), acc, depth + 1, speculative, "`eval`")
    elif name == "alias":
        for arg in args:
            if "=" in arg.value:
                _read_text(arg.value.split("=", 1)[1], acc, depth + 1, speculative, "an alias")
    elif name == "trap":
        action = [a for a in args if not a.value.startswith("-")]
        if action:
            _read_text(action[0].value, acc, depth + 1, speculative, "a trap")
    elif name == "find":
        for action_words in find_actions(args):
            _read_command(action_words, (), acc, depth, speculative)
    elif name in WRAPPERS:
        inner = unwrap(name, args)
        if inner.split is not None:
            _read_text(inner.split, acc, depth + 1, speculative, f"`{name}`'s command argument")
        if inner.shell_args:
            _read_shell(name, inner.shell_args, (), acc, depth, speculative)
        for candidate in inner.candidates():
            if len(acc.commands) >= MAX_COMMANDS:
                acc.note_opaque(f"it holds more than {MAX_COMMANDS} commands", speculative)
                break
            _read_command(candidate, redirections if inner.exact else (), acc, depth,
                          speculative or not inner.exact)


def _read_shell(name: str, args: Sequence[Word], redirections: Sequence[Redirection], acc: _Acc, depth: int,
                speculative: bool) -> None:
    call = shell_call(args)
    if call.body is not None:
        if call.body.expansions:
            acc.note_opaque(f"the `{name} -c` command `{shown(call.body.raw)}` is only known when the shell expands it",
                            speculative)
        else:
            _read_text(call.body.value, acc, depth + 1, speculative, f"`{name} -c`")
        return
    if not call.stdin:
        return  # a script file: its commands are not read (README: what a deny pattern cannot see)
    fed = [r for r in redirections if r.op.endswith(("<<", "<<-", "<<<"))]
    if fed and (text := fed[-1].body or fed[-1].target) is not None and not text.expansions:
        _read_text(text.value, acc, depth + 1, speculative, f"`{name}`'s standard input")
    else:
        acc.note_opaque(f"`{name}` reads its commands from standard input", speculative)
