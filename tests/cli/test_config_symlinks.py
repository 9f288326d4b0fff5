"""A config file that is a symlink to nothing (a dotfiles checkout moved away) or to itself is a config the person
meant to have: every command says so in one line naming the file, and none runs on the built-in defaults
instead (the rules that file held would be gone in silence). A symlink to a real file is read as that file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, strata, text
from tests.conftest import StrataCLI, write_script


def user_config(cli: StrataCLI) -> Path:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.parametrize("command", [("config", "show"), ("sessions",), ("run", "--model", "script:{script}", "hi")],
                         ids=["config_show", "sessions", "run"])
@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_user_config_symlink_that_leads_nowhere_is_an_error_not_the_defaults(cli: StrataCLI, tmp_path: Path,
                                                                                command: tuple[str, ...],
                                                                                link: str) -> None:
    script = write_script(tmp_path / "turns.json", [[text("done")]])
    path = user_config(cli)
    path.symlink_to(tmp_path / "dotfiles" / "strata.toml" if link == "dangling" else path)
    proc = strata(cli, *(arg.format(script=script) for arg in command))
    assert proc.returncode == 2, proc.stdout
    (line,) = error_lines(proc.stderr)
    reason = (f"it is a symlink to {tmp_path / 'dotfiles' / 'strata.toml'}, which does not exist"
              if link == "dangling" else "Too many levels of symbolic links")
    assert line == f"strata: error: file {path}: cannot read the file: {reason}"
    assert "Traceback" not in proc.stderr
    assert "session" not in proc.stdout


def test_a_user_config_symlink_to_a_file_is_read(cli: StrataCLI, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "strata.toml"
    real.parent.mkdir()
    real.write_text("max_turns = 7\n")
    user_config(cli).symlink_to(real)
    proc = strata(cli, "config", "show")
    assert proc.returncode == 0, proc.stderr
    assert any(line.split()[:2] == ["max_turns", "7"] for line in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_project_config_symlink_that_leads_nowhere_is_an_error_not_the_defaults(cli: StrataCLI, tmp_path: Path,
                                                                                   link: str) -> None:
    """A checkout's `.strata/config.toml` may be such a symlink too: one error line naming it (a loop used to be
    an internal error on every command in the workspace; a link to nothing was read as no project file)."""
    workspace = tmp_path / "ws"
    (workspace / ".strata").mkdir(parents=True)
    path = workspace / ".strata" / "config.toml"
    path.symlink_to("../shared/strata.toml" if link == "dangling" else "config.toml")
    script = write_script(tmp_path / "turns.json", [[text("done")]])
    for command in (("config", "show", "--workspace", str(workspace)),
                    ("run", "--model", f"script:{script}", "--workspace", str(workspace), "hi")):
        proc = strata(cli, *command)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        (line,) = error_lines(proc.stderr)
        reason = ("it is a symlink to ../shared/strata.toml, which does not exist" if link == "dangling"
                  else "Too many levels of symbolic links")
        assert line == f"strata: error: file {path}: cannot read the file: {reason}"
