"""The command reader against an independent bash parser (bashlex), real bash, and generated lines that know
what they run (tests/tool_executor/shell/_grammar.py):
(a) whenever the reader claims certainty, its words are the parser's, bash's and the grammar's;
(b) an allow pattern never matches a line in which the parser sees a command word the pattern does not name;
(c) a deny pattern on X matches every line in which X runs as a command word, through the supported wrappers,
    `bash -c` bodies and substitutions."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bashlex
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core.policy import parse_rule
from tests.tool_executor.shell._grammar import NAMES, Line, line, plain_commands
from tool_executor import builtin_tools
from tool_executor.checks.policy import rule_matches
from tool_executor.shell import read_command
from tool_executor.shell._lexer import Word, lex

BASH = next(s for s in builtin_tools() if s.name == "bash")
WORKSPACE = Path("/nonexistent-workspace")
EXPANSION_NODES = frozenset({"parameter", "commandsubstitution", "processsubstitution", "tilde"})


def _matches(action: str, pattern: str, text: str) -> bool:
    rule = parse_rule(action, f"bash({pattern})")  # type: ignore[arg-type]
    return rule_matches(rule, BASH, {"command": text}, WORKSPACE)


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for attr in ("parts", "list"):
        for child in getattr(node, attr, None) or ():
            yield from _nodes(child)
    for attr in ("command", "output", "heredoc"):
        child = getattr(node, attr, None)
        if child is not None and hasattr(child, "kind"):
            yield from _nodes(child)


def _parsed(text: str) -> list[Any] | None:
    """bashlex's command nodes, or None where it cannot judge: it decodes `$'..'` wrongly, and fails on some
    valid input."""
    if "$'" in text:
        event("bashlex skipped: ANSI-C quoting")
        return None
    try:
        trees = bashlex.parse(text)
    except Exception as exc:  # bashlex raises its own errors and NotImplementedError
        event(f"bashlex failed: {type(exc).__name__}")
        return None
    return [n for tree in trees for n in _nodes(tree) if n.kind == "command"]


def _command_word(node: Any) -> Any | None:
    words = [p for p in node.parts if p.kind in ("word", "assignment")]
    while words and words[0].kind == "assignment":
        words = words[1:]
    return words[0] if words else None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line())
def test_a_certain_reading_agrees_with_the_parser_and_the_grammar(generated: Line) -> None:
    """(a) The reader is certain exactly when the line is one plain simple command; then its words are the
    grammar's, split where bashlex splits them (real bash checks the values: the last test)."""
    reading = read_command(generated.text).reading
    assert (reading.single is not None) == generated.plain, (generated, reading.uncertain)
    if reading.single is None:
        return
    assert reading.single.words == generated.single
    parsed = _parsed(generated.text)
    if parsed is not None:  # word boundaries only: bashlex's quote removal is wrong in places ('a"'b)
        (node,) = parsed
        assert all(p.kind == "word" for p in node.parts), node.dump()
        spans = tuple(generated.text[p.pos[0]:p.pos[1]] for p in node.parts)
        assert spans == tuple(t.raw for t in lex(generated.text).tokens if isinstance(t, Word)), node.dump()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line(), st.sampled_from(NAMES))
def test_an_allow_pattern_never_vouches_for_another_command_word(generated: Line, name: str) -> None:
    """(b) If `bash(NAME*)` allows a line, the line is one command whose command word (as the parser reads it,
    after any assignment) is NAME..., with nothing else it could run."""
    if not _matches("allow", f"{name}*", generated.text):
        return
    assert generated.plain and generated.single is not None and generated.single[0].startswith(name), generated
    parsed = _parsed(generated.text)
    if parsed is not None:
        (node,) = parsed
        word = _command_word(node)
        assert word is not None and fnmatch.fnmatchcase(word.word, f"{name}*"), node.dump()
        assert [p.kind for p in node.parts].count("assignment") == 0, node.dump()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line())
def test_a_deny_pattern_meets_every_command_word_that_runs(generated: Line) -> None:
    """(c) For every command the line runs (nested in wrappers, `bash -c` bodies and substitutions included),
    `bash(NAME*)` on its command word's basename denies the line; so does it for every command word bashlex
    sees written plainly."""
    for command in generated.commands:
        word = command.words[0]
        assert word is not None
        assert _matches("deny", f"{os.path.basename(word)}*", generated.text), (word, generated)
    for node in _parsed(generated.text) or ():
        word = _command_word(node)
        if word is None or any(p.kind in EXPANSION_NODES for p in _nodes(word)):
            continue
        assert _matches("deny", f"{os.path.basename(word.word)}*", generated.text), (word.word, generated)


@pytest.fixture(scope="module")
def argv_bash(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BASH_ENV under which no command can be found, and a command that is not found prints its argv."""
    path = tmp_path_factory.mktemp("bash") / "env.sh"
    path.write_text("command_not_found_handle() { printf '%s\\0' \"$@\"; }\n")
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plain_commands())
def test_a_certain_reading_is_the_argv_real_bash_builds(argv_bash: Path, generated: Line) -> None:
    """(a) against bash itself: for a plain command in any mix of quoting styles (ANSI-C `$'..'` included), the
    reader's words are the argv bash builds (caught by `command_not_found_handle`; nothing is run)."""
    reading = read_command(generated.text).reading
    assert reading.single is not None, (generated, reading.uncertain)
    proc = subprocess.run(["/bin/bash", "-c", generated.text], env={"BASH_ENV": str(argv_bash), "PATH": "/nonexistent"},
                          capture_output=True, timeout=10)
    argv = tuple(proc.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1])
    assert argv == reading.single.words == generated.single, (generated.text, proc.stderr)
