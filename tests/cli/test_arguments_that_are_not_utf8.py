"""Command-line bytes that are not UTF-8 arrive as lone surrogates (Python's surrogateescape), which no event can
hold. Where such an argument would be stored, it is either refused in one line with exit 2 (a workspace, a rule:
their meaning depends on the exact bytes) or repaired to U+FFFD (a denial's reason: words for the model), never
an internal error or a refused commit. Real `strata` processes, a real SQLite home."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli._helpers import error_lines, result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

NOT_UTF8 = "\udcff"  # the byte 0xff as Python reads it from argv


def _turns(tmp_path: Path) -> Path:
    return write_script(tmp_path / "turns.json", [
        [text("w"), tool_use("c1", "write_file", path="out.txt", content="hi\n")], [text("done")]])


def test_a_workspace_whose_name_is_not_utf8_is_a_usage_error(cli: StrataCLI, tmp_path: Path) -> None:
    odd = tmp_path / f"ws{NOT_UTF8}"
    odd.mkdir()
    given = strata(cli, "run", "--model", f"script:{_turns(tmp_path)}", "--workspace", str(odd), "go")
    from_cwd = subprocess.run(cli.argv(["run", "--model", f"script:{_turns(tmp_path)}", "go"]), cwd=odd,
                              env=cli.env(), capture_output=True, text=True, timeout=60)
    for proc in (given, from_cwd):
        assert proc.returncode == 2, proc.stderr
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
        (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error: ")]
        assert line.startswith("Error: Invalid value for '--workspace'") and "ws\\xff is not UTF-8" in line, line
    assert strata(cli, "sessions", "--json").stdout == ""


def test_a_rule_that_is_not_utf8_is_a_usage_error(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    for flag in ("--allow", "--deny"):
        proc = strata(cli, "run", "--model", f"script:{_turns(tmp_path)}", "--workspace", str(workspace), flag,
                      f"write_file({NOT_UTF8}*)", "go")
        assert proc.returncode == 2, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert f"invalid {flag} rule" in line and "not UTF-8" in line, line
    assert strata(cli, "sessions", "--json").stdout == ""


def test_a_denial_reason_that_is_not_utf8_is_recorded_repaired(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    run = strata(cli, "run", "--model", f"script:{_turns(tmp_path)}", "--workspace", str(workspace), "--on-ask",
                 "park", "--json", "go")
    assert run.returncode == 4, run.stderr
    result = result_line(run.stdout)
    assert result is not None
    deny = strata(cli, "deny", result["session_id"], "c1", "--reason", f"not{NOT_UTF8} now")
    assert deny.returncode == 0, deny.stderr
    resumed = strata(cli, "resume", result["session_id"])
    assert resumed.returncode == 0, resumed.stderr
    assert not (workspace / "out.txt").exists()
    (denied,) = [b for m in cli.show(result["session_id"])["messages"] if m["role"] == "user"
                 for b in m["content"] if b["type"] == "tool_result"]
    assert denied["is_error"] and "not\ufffd now" in denied["content"], denied
