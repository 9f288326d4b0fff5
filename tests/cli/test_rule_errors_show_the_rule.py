"""A refused --allow/--deny rule is named as it was given, escapes and all: the error output drops a terminal's
control sequences, so a rule quoted as raw text could show as another rule (one without the '[' it is refused for)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import StrataCLI


def test_an_unclosed_bracket_rule_is_named_with_its_control_characters_escaped(cli: StrataCLI,
                                                                               workspace: Path) -> None:
    proc = cli.run("run", "--model", "scripted", "--workspace", str(workspace), "--allow", "bash(\x1b[31m)", "go")
    assert proc.returncode == 2
    first = proc.stderr.splitlines()[0]
    assert "a '[' is never closed" in first
    assert "bash(\\x1b[31m)" in first, first  # before: shown as 'bash()', the '[' it is refused for gone
