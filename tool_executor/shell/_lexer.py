"""Bash's words and operators, read conservatively: quoting and escapes resolved, every expansion noted.

The lexer never expands anything. A word keeps the literal value bash would give it when it holds no expansion
(`'r'm`, `r\\m`, `"r"m` and `r\\<newline>m` are all `rm`); where it does hold one (`$x`, `${..}`, `$(..)`,
backquotes, arithmetic, process substitution, an unquoted glob, braces or a leading `~`), the word says which,
and the bodies of command substitutions are kept so the reader can read them as commands too. What it cannot
make sense of (an unclosed quote or substitution) is reported, never guessed.

Over 400 lines as one concept: the lexer's one state machine over a command line; the scanners it shares with the
reader are in _scan.py."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.record import record
from tool_executor.shell._scan import (
    MAX_NESTING,
    TOO_DEEP,
    ansi_c,
    balanced,
    double_paren_end,
    skip_backquote,
)

_METACHARS = frozenset(" \t\n;&|()<>")
_OPERATORS = (";;&", ";;", ";&", "&&", "||", "|&", ";", "&", "|", "(", ")", "\n")
_REDIRECTIONS = ("&>>", "&>", "<<<", "<<-", "<<", "<>", ">>", ">&", "<&", ">|", "<", ">")
_NAME_START = re.compile(r"[A-Za-z_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAMS = frozenset("@*#?-$!0123456789")
_FD_PREFIX = re.compile(r"[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\}")
_ARRAY_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_PROMPT_EXPANSION = re.compile(r"@P\s*$")
_BEFORE_COMMAND = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "for",
                             "select"})
"""Reserved words after which a token still stands in command position (`if ((x))`, `! [[ a ]]`)."""

@record
class Word:
    raw: str
    """As written."""
    value: str
    """Quotes removed and escapes resolved; expansions are left in their written form."""
    quoted: bool = False
    """Some of it was quoted or escaped."""
    expansions: frozenset[str] = frozenset()
    """Kinds of expansion in it: parameter, command substitution, arithmetic, process substitution, glob,
    brace, tilde, locale string, array."""
    bodies: tuple[str, ...] = ()
    """The text of each command substitution and process substitution in it, to be read as commands."""
    hidden: tuple[str, ...] = ()
    """Why it may run code that is not written in the command (a prompt expansion `${x@P}`)."""


@record
class Op:
    text: str


@record
class Redirection:
    op: str
    target: Word | None
    body: Word | None = None
    """A here-document's text (as a word, with the expansions its unquoted delimiter allows)."""


@record
class Arithmetic:
    """An arithmetic command `((...))`."""

    raw: str
    bodies: tuple[str, ...] = ()


Token = Word | Op | Redirection | Arithmetic


@dataclass
class Lexed:
    tokens: list[Token] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """Why the text is not a complete command line (an unclosed quote, substitution or here-document)."""
    continued: bool = False
    """A backslash-newline was removed somewhere."""
    too_deep: bool = False
    """Expansions nested more than MAX_NESTING deep were not looked into."""


class _WordBuilder:
    def __init__(self) -> None:
        self.value: list[str] = []
        self.quoted = False
        self.expansions: set[str] = set()
        self.bodies: list[str] = []
        self.hidden: list[str] = []
        self.open_bracket = False
        self.open_brace = False

    def build(self, raw: str) -> Word:
        return Word(raw, "".join(self.value), self.quoted, frozenset(self.expansions), tuple(self.bodies),
                    tuple(self.hidden))


class Lexer:
    """One pass over a command line; `Lexer(text).run()`."""

    def __init__(self, text: str, level: int = 0) -> None:
        self.s = text
        self.i = 0
        self.level = level
        self.out = Lexed(too_deep=level > MAX_NESTING)
        self.heredocs: list[tuple[int, str, bool, bool]] = []
        """Pending here-documents: token index, delimiter, strip tabs, delimiter quoted."""
        self.command_position = True
        self.condition = False

    def run(self) -> Lexed:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.out.continued = True
                self.i += 2
            elif c == "\n":
                self._emit(Op("\n"))
                self.i += 1
                self._read_heredocs()
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif self.condition and c in "&|()<>" and not (c in "<>" and s.startswith("(", self.i + 1)):
                start = self.i
                while self.i < len(s) and s[self.i] in "&|()<>":
                    self.i += 1
                self._emit(Word(s[start:self.i], s[start:self.i]))
            elif self.command_position and s.startswith("((", self.i) and self._arithmetic_command():
                pass
            elif c in "<>" and s.startswith("(", self.i + 1):
                self._emit(self._word())
            elif c in ";&|()<>\n":
                self._operator()
            else:
                start = self.i
                word = self._word()
                if self.i < len(s) and s[self.i] in "<>" and _FD_PREFIX.fullmatch(word.raw) \
                        and not s.startswith("(", self.i + 1):
                    self.i = start + len(word.raw)
                    self._operator(fd=word.raw)
                else:
                    self._emit(word)
        if self.heredocs:
            self._read_heredocs()
        return self.out

    # -- tokens --------------------------------------------------------------------------------------------

    def _emit(self, token: Token) -> None:
        self.out.tokens.append(token)
        if isinstance(token, Op):
            self.command_position = token.text != ")"
        elif isinstance(token, Word):
            if token.raw == "[[" and self.command_position:
                self.condition = True
            elif token.raw == "]]" and self.condition:
                self.condition = False
            self.command_position = token.raw in _BEFORE_COMMAND and not token.quoted
        elif isinstance(token, Arithmetic):
            self.command_position = False

    def _arithmetic_command(self) -> bool:
        end = double_paren_end(self.s, self.i)
        if end < 0:
            return False
        raw = self.s[self.i:end]
        self.i = end
        self._emit(Arithmetic(raw, self._scan(raw[2:-2])))
        return True

    def _operator(self, fd: str = "") -> None:
        s = self.s
        for op in _REDIRECTIONS:
            if s.startswith(op, self.i):
                self.i += len(op)
                self._redirection(fd + op)
                return
        for op in _OPERATORS:
            if s.startswith(op, self.i):
                self.i += len(op)
                self._emit(Op(op))
                return
        raise AssertionError(s[self.i])  # pragma: no cover - every metacharacter is an operator

    def _redirection(self, op: str) -> None:
        s = self.s
        while self.i < len(s) and (s[self.i] in " \t" or s.startswith("\\\n", self.i)):
            self.i += 2 if s[self.i] == "\\" else 1
        if self.i >= len(s) or (s[self.i] in _METACHARS and not (s[self.i] in "<>" and s.startswith("(", self.i + 1))):
            self.out.problems.append(f"a redirection `{op}` without a target")
            target = None
        else:
            target = self._word()
        keep = self.command_position
        self.out.tokens.append(Redirection(op, target))
        self.command_position = keep
        if op.endswith(("<<", "<<-")) and not op.endswith("<<<") and target is not None:
            self.heredocs.append((len(self.out.tokens) - 1, target.value, op.endswith("-"), target.quoted))

    def _read_heredocs(self) -> None:
        s = self.s
        pending, self.heredocs = self.heredocs, []
        for index, delimiter, strip_tabs, quoted in pending:
            lines: list[str] = []
            while True:
                if self.i >= len(s):
                    self.out.problems.append(f"a here-document without its closing `{delimiter}` line")
                    break
                end = s.find("\n", self.i)
                line = s[self.i:] if end < 0 else s[self.i:end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            text = "\n".join(lines) + ("\n" if lines else "")
            body = Word(text, text) if quoted else self._here_document(text)
            old = self.out.tokens[index]
            assert isinstance(old, Redirection)
            self.out.tokens[index] = Redirection(old.op, old.target, body)

    def _scan(self, text: str) -> tuple[str, ...]:
        word, too_deep = here_document_word(text, self.level + 1)
        self.out.too_deep = self.out.too_deep or too_deep
        return word.bodies

    def _here_document(self, text: str) -> Word:
        word, too_deep = here_document_word(text, self.level + 1)
        self.out.too_deep = self.out.too_deep or too_deep
        return word

    # -- words ---------------------------------------------------------------------------------------------

    def _word(self) -> Word:
        s = self.s
        start = self.i
        w = _WordBuilder()
        while self.i < len(s):
            c = s[self.i]
            if c in "<>" and s.startswith("(", self.i + 1):
                self._substitution(w, self.i + 1, "process substitution")
                continue
            if c == "(" and _ARRAY_ASSIGNMENT.fullmatch(s[start:self.i]):
                end = self._closed(balanced(s, self.i, "(", ")"), "an unclosed `(`")
                w.expansions.add("array")
                w.bodies.extend(self._scan(s[self.i + 1:end - 1]))
                w.value.append(s[self.i:end])
                self.i = min(end, len(s))
                continue
            if c in _METACHARS:
                break
            if c == "\\":
                if s.startswith("\\\n", self.i):
                    self.out.continued = True
                elif self.i + 1 < len(s):
                    w.value.append(s[self.i + 1])
                    w.quoted = True
                else:
                    w.value.append("\\")
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    self.out.problems.append("an unclosed `'`")
                    end = len(s)
                w.value.append(s[self.i + 1:end])
                w.quoted = True
                self.i = end + 1
            elif c == '"':
                w.quoted = True
                self.i = self._double(w, self.i + 1)
            elif c == "$":
                self._dollar(w, in_double=False)
            elif c == "`":
                self._backquote(w)
            else:
                self._plain(w, c, self.i == start or s[self.i - 1] in "=:")
                self.i += 1
        return w.build(s[start:self.i])

    def _plain(self, w: _WordBuilder, c: str, tilde_position: bool) -> None:
        if c in "*?":
            w.expansions.add("glob")
        elif c == "[":
            w.open_bracket = True
        elif c == "]" and w.open_bracket:
            w.expansions.add("glob")
        elif c == "{":
            w.open_brace = True
        elif c == "}" and w.open_brace:
            w.expansions.add("brace")
        elif c == "~" and tilde_position:
            w.expansions.add("tilde")
        w.value.append(c)

    def _double(self, w: _WordBuilder, i: int, closing: str | None = '"') -> int:
        """Read double-quoted text from `i` up to `closing` (None: to the end); index past it."""
        s = self.s
        self.i = i
        while self.i < len(s):
            c = s[self.i]
            if c == closing:
                return self.i + 1
            if c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '$`"\\\n':
                if s[self.i + 1] == "\n":
                    self.out.continued = True
                else:
                    w.value.append(s[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(w, in_double=True)
            elif c == "`":
                self._backquote(w)
            else:
                w.value.append(c)
                self.i += 1
        if closing is not None:
            self.out.problems.append('an unclosed `"`')
        return self.i

    def _dollar(self, w: _WordBuilder, in_double: bool) -> None:
        s = self.s
        i = self.i
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if nxt == "'" and not in_double:
            decoded: list[str] = []
            end = ansi_c(s, i + 2, decoded)
            if end < 0:
                self.out.problems.append("an unclosed `$'`")
                end = len(s)
            w.value.append("".join(decoded))
            w.quoted = True
            self.i = end
        elif nxt == '"' and not in_double:
            w.expansions.add("locale string")
            w.quoted = True
            self.i = self._double(w, i + 2)
        elif nxt == "(" and double_paren_end(s, i + 1) > 0:
            self._arithmetic(w, i + 1, "(", ")")
        elif nxt == "(":
            self._substitution(w, i + 1, "command substitution")
        elif nxt == "[":
            self._arithmetic(w, i + 1, "[", "]")
        elif nxt == "{":
            end = self._closed(balanced(s, i + 1, "{", "}"), "an unclosed `${`")
            inner = s[i + 2:end - 1]
            w.expansions.add("parameter")
            w.bodies.extend(self._scan(inner))
            if _PROMPT_EXPANSION.search(inner):
                w.hidden.append("a prompt expansion `${..@P}` can run commands held in a variable")
            w.value.append(s[i:end])
            self.i = min(end, len(s))
        elif nxt and (_NAME_START.match(nxt) or nxt in _SPECIAL_PARAMS):
            m = _NAME.match(s, i + 1)
            end = m.end() if m else i + 2
            w.expansions.add("parameter")
            w.value.append(s[i:end])
            self.i = end
        else:
            w.value.append("$")
            self.i = i + 1

    def _closed(self, end: int, problem: str) -> int:
        """`end` from a scanner, or, when it found no end, one past the text's end (so `[start:end - 1]` is
        the rest of the text), with the problem noted."""
        if end >= 0:
            return end
        if end == TOO_DEEP:
            self.out.too_deep = True
        self.out.problems.append(problem)
        return len(self.s) + 1

    def _arithmetic(self, w: _WordBuilder, i: int, open_: str, close: str) -> None:
        end = self._closed(balanced(self.s, i, open_, close), "an unclosed arithmetic expansion")
        w.expansions.add("arithmetic")
        w.bodies.extend(self._scan(self.s[i + 1:end - 1]))
        w.value.append(self.s[i - 1:end])
        self.i = min(end, len(self.s))

    def _substitution(self, w: _WordBuilder, i: int, kind: str) -> None:
        end = self._closed(balanced(self.s, i, "(", ")"), f"an unclosed {kind}")
        w.expansions.add(kind)
        w.bodies.append(self.s[i + 1:end - 1])
        w.value.append(self.s[i - 1:end])
        self.i = min(end, len(self.s))

    def _backquote(self, w: _WordBuilder) -> None:
        start = self.i
        end = self._closed(skip_backquote(self.s, start + 1), "an unclosed backquote")
        w.expansions.add("command substitution")
        w.bodies.append(re.sub(r"\\([$`\\])", r"\1", self.s[start + 1:end - 1]))
        w.value.append(self.s[start:end])
        self.i = min(end, len(self.s))


def here_document_word(text: str, level: int = 0) -> tuple[Word, bool]:
    """Text expanded like a double-quoted string (an unquoted here-document, the inside of `${..}` and of
    arithmetic) as a word, and whether it nests too deep to be read whole."""
    lexer = Lexer(text, level)
    w = _WordBuilder()
    if not lexer.out.too_deep:
        lexer._double(w, 0, closing=None)
    return w.build(text), lexer.out.too_deep


def lex(text: str) -> Lexed:
    return Lexer(text).run()
