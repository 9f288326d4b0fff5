"""Every command builds its runtime once from the loaded config (`Runtime.open(config)`): a setting of the session's
project file applies to `strata resume` as it does to `strata run`, and an error line is masked with the home's
masker, configured secrets included, on every command."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli._helpers import result_line, text, tool_use
from tests.conftest import StrataCLI, write_script

SECRET = "sk-ant-api03-" + "Qw9_Er8-Ty7Ui6Op5As4Df3Gh2Jk1Lz0XcVbNm" * 2
"""An obviously fake key that the masking patterns recognise."""
KNOWN = "correct-horse-battery-staple-4711"
"""A configured secret value: no pattern recognises it, only the home's masker knows it."""


def _synchronous(stderr: str) -> list[str]:
    """The `synchronous` mode of each database the process opened (the store's debug line, `--verbose`)."""
    return re.findall(r"database opened .*synchronous=(\w+)", stderr)


def test_resume_opens_the_database_with_the_projects_durability(cli: StrataCLI, workspace: Path,
                                                                tmp_path: Path) -> None:
    """A project file's `durability = "normal"` is the durability of `strata resume` too, not only of `run`."""
    (workspace / ".strata").mkdir()
    (workspace / ".strata" / "config.toml").write_text('durability = "normal"\n')
    script = write_script(tmp_path / "turns.json", [[tool_use("toolu_r", "read_file", path="a.txt")],
                                                    [text("read")], [text("again")]])
    (workspace / "a.txt").write_text("hello\n")
    run = cli.run("--verbose", "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    assert run.returncode == 0, run.stderr
    assert _synchronous(run.stderr) == ["NORMAL"], run.stderr
    result = result_line(run.stdout)
    assert result is not None
    resumed = cli.run("--verbose", "resume", result["session_id"], "--json", "once more")
    assert resumed.returncode == 0, resumed.stderr
    assert set(_synchronous(resumed.stderr)) == {"NORMAL"}, resumed.stderr


def test_an_error_line_is_masked_with_the_homes_configured_secrets(cli: StrataCLI) -> None:
    """A command's error that quotes what the user typed hides a secret the user config names, as the timeline
    would: masked by the home's masker, not by one that knows only the patterns."""
    config = cli.home / "xdg-config" / "strata"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(f'[secrets]\nvalues = ["{KNOWN}"]\n')
    for command in ("show", "resume", "timeline", "export", "fork"):
        args = [command, KNOWN] + (["--at-event", "1"] if command == "fork" else [])
        proc = cli.run(*args)
        assert proc.returncode == 1, (command, proc.stderr)
        assert "no session with id" in proc.stderr and "[MASKED:" in proc.stderr, (command, proc.stderr)
        assert KNOWN not in proc.stderr, (command, proc.stderr)


def test_a_config_commands_error_is_masked(cli: StrataCLI, workspace: Path) -> None:
    """`strata config show` and `strata trust` report a bad value in one line, exit 2, with a secret in it masked
    like every other command's error (they had an error path of their own that did not mask)."""
    (workspace / ".strata").mkdir()
    (workspace / ".strata" / "config.toml").write_text(f'durability = "{SECRET}"\n')
    for args in (("config", "show", "--workspace", str(workspace)), ("trust", str(workspace))):
        proc = cli.run(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        (line,) = [line for line in proc.stderr.splitlines() if line.startswith("strata: error:")]
        assert "durability" in line and "[MASKED:" in line, (args, proc.stderr)
        assert SECRET not in proc.stderr, (args, proc.stderr)
