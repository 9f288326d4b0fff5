"""An error is one line (plus its hint) whatever it quotes: a line break in the user's own path or model name is
shown escaped, so it cannot split the error in two or add a line that reads as another `strata: error` (the one
place errors are shown: agent/cli/output.py say_error). An error that lists candidates keeps its listing lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import error_lines, strata, text
from tests.conftest import StrataCLI, write_script


@pytest.mark.parametrize("where", ["STRATA_MODEL", "--workspace"])
def test_a_line_break_in_a_path_the_user_gave_is_shown_escaped_in_the_one_error_line(
        cli: StrataCLI, workspace: Path, tmp_path: Path, where: str) -> None:
    fake = "\nstrata: error: something else failed"
    script = write_script(tmp_path / "s.json", [[text("ok")]])
    if where == "STRATA_MODEL":
        run = strata(cli, "run", "--workspace", str(workspace), "go", env={"STRATA_MODEL": f"script:/x{fake}"})
    else:
        run = strata(cli, "run", "--model", f"script:{script}", "--workspace", f"{tmp_path}/none{fake}", "go")
    assert run.returncode == 2, run.stderr
    (line,) = error_lines(run.stderr)
    assert "\\nstrata: error: something else failed" in line, line
    assert all(s.startswith(("strata: error: ", "hint: ")) for s in run.stderr.splitlines()), run.stderr


def test_an_ambiguous_prefix_still_lists_the_sessions_it_names(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", [[text("ok")]])
    ids: list[str] = []
    while len(ids) < 2 or ids[-1][:8] != ids[-2][:8]:  # ids begin with the time: the next one shares 8 characters
        assert strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "go").returncode == 0
        ids = sorted(row["id"] for row in json_lines_in_process(cli, "sessions", "--json"))
    prefix = ids[-1][:8]
    named = [i for i in ids if i.startswith(prefix)]
    shown = strata(cli, "show", prefix)
    assert shown.returncode == 2, shown.stderr
    head, *listed, hint = shown.stderr.splitlines()
    assert head == f"strata: error: session id prefix '{prefix}' names {len(named)} sessions:", head
    assert sorted(line.split()[0] for line in listed) == named and all(line.startswith("  ") for line in listed)
    assert hint == "hint: give more characters of the id"
