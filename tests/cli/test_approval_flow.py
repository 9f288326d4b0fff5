"""Asks with no person at the terminal: denied (the session goes on), or parked until `strata approve` /
`strata deny` and `strata resume` (real processes, real SQLite file)."""

from __future__ import annotations

from pathlib import Path

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import json_lines, result_line, text, tool_use
from tests.conftest import StrataCLI, write_script


def _script(tmp_path: Path) -> Path:
    return write_script(tmp_path / "turns.json", [
        [text("writing"), tool_use("toolu_w", "write_file", path="./out.txt", content="hello\n"),
         tool_use("toolu_r", "read_file", path="a.txt")],
        [text("done")],
    ])


def _results(cli: StrataCLI, session_id: str) -> dict[str, dict]:
    view = show_in_process(cli, session_id)
    return {b["tool_use_id"]: b for m in view["messages"] if m["role"] == "user" for b in m["content"]
            if b["type"] == "tool_result"}


def test_headless_ask_is_denied_and_the_session_completes(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Without --allow, write_file asks; headless has no person, so the call is denied, the model sees why, and the
    run still completes with exit code 0."""
    (workspace / "a.txt").write_text("alpha\n")
    proc = cli.run("run", "--model", f"script:{_script(tmp_path)}", "--workspace", str(workspace), "--json", "go")
    assert proc.returncode == 0, proc.stderr
    result = result_line(proc.stdout)
    assert result is not None and result["status"] == "completed"
    results = _results(cli, result["session_id"])
    denied = results["toolu_w"]
    assert denied["is_error"] and "no person to approve it in headless mode" in denied["content"]
    assert "--on-ask park" in results["toolu_w"]["content"]
    assert results["toolu_r"]["content"] == "alpha\n"
    assert not (workspace / "out.txt").exists()


def _park(cli: StrataCLI, workspace: Path, tmp_path: Path) -> str:
    (workspace / "a.txt").write_text("alpha\n")
    proc = cli.run("run", "--model", f"script:{_script(tmp_path)}", "--workspace", str(workspace), "--on-ask",
                   "park", "--json", "go")
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    result = result_line(proc.stdout)
    assert result is not None and result["status"] == "awaiting_approval"
    (parked,) = result["parked"]
    assert parked["call_id"] == "toolu_w" and parked["input"] == {"path": "out.txt", "content": "hello\n"}
    assert not (workspace / "out.txt").exists()
    sessions = json_lines_in_process(cli, "sessions", "--json")
    assert sessions[-1]["status"] == "awaiting_approval"
    return str(result["session_id"])


def test_park_then_approve_then_resume_runs_exactly_that_call(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    """`--on-ask park` exits 4 with nothing run; `strata approve` then `strata resume` runs the approved call once,
    and the approver is recorded."""
    session_id = _park(cli, workspace, tmp_path)
    approve = cli.run("approve", session_id, "toolu_w")
    assert approve.returncode == 0, approve.stderr
    assert f"strata resume {session_id}" in approve.stdout
    resumed = cli.run("resume", session_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "out.txt").read_text() == "hello\n"
    results = _results(cli, session_id)
    assert not results["toolu_w"]["is_error"] and results["toolu_r"]["content"] == "alpha\n"
    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert receipt["status"] == "done" and receipt["call_id"] == "toolu_w"
    events = [e for e in json_lines(resumed.stdout) if e.get("type") != "result"]
    assert not any(e.get("kind") == "calls_parked" for e in events)


def test_park_then_deny_tells_the_model_and_runs_nothing(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """`strata deny --reason` rejects the parked call: on resume the model gets the denial with the reason and
    the file is never written."""
    session_id = _park(cli, workspace, tmp_path)
    deny = cli.run("deny", session_id, "toolu_w", "--reason", "not in this repo")
    assert deny.returncode == 0, deny.stderr
    resumed = cli.run("resume", session_id)
    assert resumed.returncode == 0, resumed.stderr
    result = _results(cli, session_id)["toolu_w"]
    assert result["is_error"] and "not in this repo" in result["content"] and "rejected by person:" in result["content"]
    assert not (workspace / "out.txt").exists()
    assert json_lines_in_process(cli, "receipts", session_id, "--json") == []


def test_resume_without_a_decision_parks_again(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Resuming a parked session before anyone decided parks the same call again (exit 4) and runs nothing."""
    session_id = _park(cli, workspace, tmp_path)
    again = cli.run("resume", session_id)
    assert again.returncode == 4, again.stderr
    assert f"strata approve {session_id} toolu_w" in again.stdout
    assert not (workspace / "out.txt").exists()


def test_approve_names_the_waiting_calls_when_given_a_wrong_one(cli: StrataCLI, workspace: Path,
                                                                 tmp_path: Path) -> None:
    """Approving a call that is not parked is one clear error naming the calls that are."""
    session_id = _park(cli, workspace, tmp_path)
    proc = cli.run("approve", session_id, "toolu_nope")
    assert proc.returncode == 2
    assert "toolu_nope" in proc.stderr and "toolu_w" in proc.stderr and "Traceback" not in proc.stderr
