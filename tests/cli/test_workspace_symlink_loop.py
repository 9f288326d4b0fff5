"""A `--workspace` that is a symlink loop (a link made round to itself) is a usage error naming it (the option's
bad value, exit 2), for every command that takes a workspace; it was an internal error (RuntimeError from
Path.resolve) on each of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._helpers import error_lines, strata, text
from tests.conftest import StrataCLI, write_script


@pytest.mark.parametrize("command", [("config", "show"), ("run", "--model", "script:{script}", "hi"),
                                     ("knowledge", "list"), ("trust",), ("mcp", "list"), ("doctor",)],
                         ids=["config_show", "run", "knowledge_list", "trust", "mcp_list", "doctor"])
def test_a_workspace_that_is_a_symlink_loop_is_a_usage_error_naming_it(cli: StrataCLI, tmp_path: Path,
                                                                        command: tuple[str, ...]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    script = write_script(tmp_path / "turns.json", [[text("done")]])
    args = [arg.format(script=script) for arg in command]
    args = [*args, str(loop)] if command == ("trust",) else [*args, "--workspace", str(loop)]
    proc = strata(cli, *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"workspace {loop} cannot be resolved: a symlink loop" in proc.stderr, proc.stderr
    assert "Invalid value for" in proc.stderr and error_lines(proc.stderr) == [], proc.stderr
    assert "internal error" not in proc.stderr
