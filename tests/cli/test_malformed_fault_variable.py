"""A malformed `STRATA_FAULT` (the crash tests' variable, core/faults.py, read when the module is imported) makes
`strata run` fail with one line naming the variable and its value, exit 1, before anything runs or is recorded;
before, the parse's ValueError was reported as an internal error to rerun with --verbose and report (a real
`strata run` process, the scripted model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, write_script
from tests.conftest import StrataCLI


@pytest.mark.parametrize("value", ["after_commit:x", "after_commit:0", ":2", "after_commit:-1"])
def test_a_malformed_fault_variable_is_one_error_line_naming_it(cli: StrataCLI, workspace: Path, tmp_path: Path,
                                                                 value: str) -> None:
    script = write_script(tmp_path / "turns.json", [[text("never asked")]])
    done = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go",
                   env={"STRATA_FAULT": value})
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [f"strata: error: STRATA_FAULT={value!r} is malformed: it is for crash tests "
                                        "only, <point>[:<n>] with n a whole number from 1; unset it"], done.stderr
    assert "internal error" not in done.stderr and done.stdout == ""
    assert json_lines_in_process(cli, "sessions", "--json") == []


def test_a_well_formed_fault_variable_for_a_point_never_reached_changes_nothing(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[text("answered")]])
    done = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go",
                   env={"STRATA_FAULT": "after_child:2"})
    assert done.returncode == 0, done.stderr
    assert "answered" in done.stdout
