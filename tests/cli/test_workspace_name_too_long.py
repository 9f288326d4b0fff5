"""A --workspace whose name is longer than a file name can be (ENAMETOOLONG on its first stat) is a usage error in
one line, exit 2, never an internal error; nothing is recorded. Real `strata` processes."""

from __future__ import annotations

from pathlib import Path

from tests.cli._helpers import error_lines, strata
from tests.conftest import StrataCLI, write_script


def test_a_workspace_name_longer_than_a_file_name_is_a_usage_error(cli: StrataCLI, tmp_path: Path) -> None:
    turns = write_script(tmp_path / "turns.json", [[{"type": "text", "text": "done"}]])
    for workspace in (tmp_path / ("w" * 300), Path("/tmp/" + "a/" * 3000)):
        proc = strata(cli, "run", "--model", f"script:{turns}", "--workspace", str(workspace), "go")
        assert proc.returncode == 2, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert line.startswith(f"strata: error: workspace {workspace}") and "File name too long" in line, line
    assert strata(cli, "sessions", "--json").stdout == ""
