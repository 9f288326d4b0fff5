"""A write killed around its dispatch leaves an uncertain receipt; `strata reconcile --probe` decides it from the
file system (written / not written), records who decided, never runs the tool again, and the model hears the
reconciled outcome on resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, run_in_process, show_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script


@pytest.mark.parametrize(("fault", "written", "status"), [
    ("after_receipt", False, "failed"),   # killed after the receipt was durable, before the handler ran
    ("after_dispatch", True, "done"),     # killed after the handler wrote the file, before its result was kept
])
def test_probe_decides_a_killed_write(cli: StrataCLI, workspace: Path, tmp_path: Path, fault: str, written: bool,
                                      status: str) -> None:
    """The probe reads the file: the receipt becomes done or failed by `probe:write_file`; on resume the model is
    told, and the write is never repeated (the file is untouched by the resume)."""
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file",
                     "go", env={"STRATA_FAULT": fault})
    assert killed.returncode == -9
    assert (workspace / "out.txt").exists() is written
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    (receipt,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    assert receipt["status"] == "dispatched"

    probed = cli.run("reconcile", "--probe", session["id"])
    assert probed.returncode == 0, probed.stderr
    (after,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    assert after["status"] == status and after["reconciled_by"] == "probe:write_file"
    assert "probe:" in after["note"]

    if written:
        (workspace / "out.txt").write_text("changed by a person after the probe\n")
    resumed = cli.run("resume", session["id"])
    assert resumed.returncode == 0, resumed.stderr
    view = show_in_process(cli, session["id"])
    (result,) = [b for m in view["messages"] if m["role"] == "user" for b in m["content"]
                 if b["type"] == "tool_result"]
    assert ("reconciled as applied" if written else "reconciled as not applied") in result["content"]
    assert "probe:write_file" in result["content"]
    if written:  # not re-run: the person's later change is still there
        assert (workspace / "out.txt").read_text() == "changed by a person after the probe\n"
    else:
        assert not (workspace / "out.txt").exists()
    again = cli.run("reconcile", "--probe", session["id"])
    assert again.returncode == 0 and "no unknown receipts" in again.stdout


def test_probe_decides_nothing_when_the_session_workspace_is_gone(cli: StrataCLI, workspace: Path,
                                                                 tmp_path: Path) -> None:
    """A write that happened, then the workspace moved away (a careless `mv`): the probe finds no file, but absence
    of the workspace is no evidence; the receipt stays undecided (skipped, saying why) instead of being recorded
    for good as not applied, and once the workspace is back the probe decides it applied."""
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file",
                     "go", env={"STRATA_FAULT": "after_dispatch"})
    assert killed.returncode == -9
    assert (workspace / "out.txt").read_text() == "hello\n"
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    moved = tmp_path / "moved-away"
    workspace.rename(moved)

    probed = cli.run("reconcile", "--probe", session["id"])
    assert probed.returncode == 0, probed.stderr
    assert "skipped" in probed.stdout and "workspace" in probed.stdout, probed.stdout
    (receipt,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    assert receipt["status"] == "dispatched" and receipt["reconciled_by"] is None, receipt

    moved.rename(workspace)
    again = cli.run("reconcile", "--probe", session["id"])
    assert again.returncode == 0, again.stderr
    (after,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    assert after["status"] == "done" and after["reconciled_by"] == "probe:write_file", after
    verified = run_in_process(cli, "timeline", session["id"], "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
