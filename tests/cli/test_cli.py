"""The `strata` command line as a contract, with real processes: the `--json` shapes of sessions, show and
receipts; reconciliation of unknown effects; documented exit codes (0 completed, 1 error, 2 usage,
3 incomplete, 5 unknown effects pending); clear one-line errors and never a traceback."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    assert_clean_stderr,
    bash_mark,
    check_pairing,
    effect_counts,
    error_lines,
    events_of,
    holds_open,
    json_lines,
    marker,
    parallel,
    result_line,
    strata,
    strata_json,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

SESSION_KEYS = {"id", "status", "mode", "model", "workspace", "created_at", "updated_at"}
RECEIPT_KEYS = {"id", "session_id", "call_id", "tool", "status", "idempotency_key", "args_sha256", "created_at"}

SCRIPT_ONE = [[bash_mark("one_sh")], [text("first session done")]]
SCRIPT_TWO = [
    [text("Let me look around."),
     tool_use("rd", "read_file", path="notes.txt"),
     tool_use("wr", "write_file", path="out/result.txt", content="the result\n"),
     bash_mark("sh"),
     tool_use("esc", "write_file", path="../outside.txt", content="must not land"),
     tool_use("ed", "edit_file", path="notes.txt", old="hello", new="bye")],
    [text("Finished.")],
]
NOTES = "hello notes\nsecond line\n"


@dataclass
class Sessions:
    cli: StrataCLI
    scripts: list[Path]
    workspaces: list[Path]
    prompts: list[str]
    runs: list[subprocess.CompletedProcess[str]]

    @property
    def ids(self) -> list[str]:
        return [events_of(r.stdout)[0]["session_id"] for r in self.runs]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Sessions:
    """Two completed headless sessions, the second with read, write, shell and denied calls."""
    base = tmp_path_factory.mktemp("cli-sessions")
    cli = StrataCLI(base / "home", base)
    made = Sessions(cli, [], [], ["say hello", "look at the notes"], [])
    for k, turns in enumerate((SCRIPT_ONE, SCRIPT_TWO)):
        ws = base / f"ws{k}"
        ws.mkdir()
        (ws / "notes.txt").write_text(NOTES)
        script = write_script(base / f"script{k}.json", turns)
        made.scripts.append(script)
        made.workspaces.append(ws)
        made.runs.append(strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), *ALLOW_EFFECTS,
                                "--json", made.prompts[k]))
    return made


def test_completed_run_exits_0(sessions: Sessions) -> None:
    """A run that finishes exits 0 and its last --json line says completed with no unknown effects."""
    for run in sessions.runs:
        assert run.returncode == 0, run.stderr
        summary = result_line(run.stdout)
        assert summary is not None and summary["status"] == "completed" and summary["unknown_receipts"] == 0
        assert summary["exit_code"] == 0


def test_sessions_json_one_object_per_line_oldest_first(sessions: Sessions) -> None:
    """`strata sessions --json` prints one object per line, oldest first, with the documented keys."""
    proc = strata(sessions.cli, "sessions", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    rows = [json.loads(line) for line in lines]
    assert [r["id"] for r in rows] == sessions.ids
    created = [datetime.fromisoformat(r["created_at"]) for r in rows]
    assert created == sorted(created)
    for row, script, ws in zip(rows, sessions.scripts, sessions.workspaces, strict=True):
        assert set(row) >= SESSION_KEYS, SESSION_KEYS - set(row)
        assert row["status"] == "completed"
        assert row["mode"] == "headless"
        assert row["model"] == f"script:{script.resolve()}"
        assert row["workspace"] == os.path.realpath(ws)
        assert datetime.fromisoformat(row["updated_at"]) >= datetime.fromisoformat(row["created_at"])


def test_show_json_is_one_object_in_messages_api_shape(sessions: Sessions) -> None:
    """`strata show ID --json` is one object {"session", "messages"}, the messages in Messages API shape."""
    sid, ws = sessions.ids[1], sessions.workspaces[1]
    proc = strata(sessions.cli, "show", sid, "--json")
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    view = json.loads(line)
    assert {"session", "messages"} <= set(view)
    assert view["session"]["id"] == sid and view["session"]["status"] == "completed"
    messages = view["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert all(set(m) == {"role", "content"} for m in messages)
    assert messages[0]["content"] == [{"type": "text", "text": sessions.prompts[1]}]
    assert messages[1]["content"] == SCRIPT_TWO[0]  # text and tool_use blocks exactly as the model sent them
    assert messages[3]["content"] == SCRIPT_TWO[1]
    results = check_pairing(messages)
    assert all(set(b) == {"type", "tool_use_id", "content", "is_error"} for b in results.values())
    assert results["rd"] == {"type": "tool_result", "tool_use_id": "rd", "content": NOTES, "is_error": False}
    assert results["wr"]["is_error"] is False and (ws / "out/result.txt").read_text() == "the result\n"
    assert results["sh"]["is_error"] is False and effect_counts(ws)[marker("sh")] == 1
    for denied in ("esc", "ed"):
        assert results[denied]["is_error"] is True and "denied" in results[denied]["content"].lower()
    assert not (ws.parent / "outside.txt").exists()
    assert (ws / "notes.txt").read_text() == NOTES


def test_receipts_json_keys_and_filters(sessions: Sessions) -> None:
    """`strata receipts [ID] [--status S] --json`: one object per line with the documented keys, filtered."""
    cli = sessions.cli
    one, two = sessions.ids
    every = strata_json(cli, "receipts", "--json")
    for row in every:
        assert set(row) >= RECEIPT_KEYS, RECEIPT_KEYS - set(row)
        datetime.fromisoformat(row["created_at"])
    # One receipt per effectful call that passed its checks: none for read-only or denied calls.
    assert sorted((r["session_id"], r["call_id"]) for r in every) == sorted(
        [(one, "one_sh"), (two, "wr"), (two, "sh")])
    assert len({r["id"] for r in every}) == len({r["idempotency_key"] for r in every}) == len(every)
    planned = {c["call_id"]: c for e in events_of(sessions.runs[1].stdout) if e["kind"] == "batch_proposed"
               for c in e["calls"]}
    mine = strata_json(cli, "receipts", two, "--json")
    assert mine == [r for r in every if r["session_id"] == two]
    for row in mine:
        assert row["status"] == "done"
        assert row["tool"] == planned[row["call_id"]]["tool"]
        assert row["args_sha256"] == planned[row["call_id"]]["input_sha256"]
    assert strata_json(cli, "receipts", two, "--status", "done", "--json") == mine
    assert strata_json(cli, "receipts", two, "--status", "unknown", "--json") == []


def test_reconcile_of_a_done_receipt_is_a_clear_error(sessions: Sessions) -> None:
    """Reconciling a receipt that is already done exits 1 with a clear message and changes nothing."""
    cli = sessions.cli
    (row,) = [r for r in strata_json(cli, "receipts", sessions.ids[1], "--json") if r["call_id"] == "wr"]
    proc = strata(cli, "reconcile", row["id"], "--not-applied", "--note", "should be refused")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert row["id"] in line and "done" in line, line
    (after,) = [r for r in strata_json(cli, "receipts", sessions.ids[1], "--json") if r["call_id"] == "wr"]
    assert after == row


@pytest.mark.slow
def test_reconcile_unknown_receipts_and_the_model_hears_it(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Reconciled unknown receipts are reported to the model on the next resume, and never re-run."""
    script = write_script(tmp_path / "script.json", [[bash_mark("call_a")], [bash_mark("call_b")], [text("done")]])
    kill = {"STRATA_FAULT": "after_receipt:1"}  # killed after the receipt commit, before the handler starts
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS, "--json",
                 "go", env=kill)
    assert run.returncode == -signal.SIGKILL
    sid = events_of(run.stdout)[0]["session_id"]
    assert strata(cli, "resume", sid, env=kill).returncode == -signal.SIGKILL  # call_a settled, call_b killed
    pending = strata(cli, "resume", sid)
    assert pending.returncode == 5, pending.stderr  # unknown effects pending
    unknown = {r["call_id"]: r for r in json_lines_in_process(cli, "receipts", sid, "--status", "unknown", "--json")}
    assert set(unknown) == {"call_a", "call_b"}

    usage = strata(cli, "reconcile", unknown["call_a"]["id"])
    assert usage.returncode == 2  # say what happened
    applied = strata(cli, "reconcile", unknown["call_a"]["id"], "--applied", "--note", "saw it in effects.log")
    assert applied.returncode == 0, applied.stderr
    not_applied = strata(cli, "reconcile", unknown["call_b"]["id"], "--not-applied", "--note", "no trace of it")
    assert not_applied.returncode == 0, not_applied.stderr
    rows = {r["call_id"]: r for r in json_lines_in_process(cli, "receipts", sid, "--json")}
    assert rows["call_a"]["status"] == "done" and rows["call_a"]["note"] == "saw it in effects.log"
    assert rows["call_b"]["status"] == "failed" and rows["call_b"]["note"] == "no trace of it"
    assert rows["call_a"]["reconciled_by"] and rows["call_b"]["reconciled_by"]
    before = len(json_lines_in_process(cli, "show", sid, "--json")[0]["messages"])

    resumed = strata(cli, "resume", sid, "carry on")
    assert resumed.returncode == 0, resumed.stderr  # nothing unknown remains
    messages = json_lines_in_process(cli, "show", sid, "--json")[0]["messages"]
    check_pairing(messages)
    nxt = messages[before]
    assert nxt["role"] == "user"
    texts = [b["text"] for b in nxt["content"] if b["type"] == "text"]
    assert texts[-1] == "carry on"
    (notice,) = [t for t in texts if "call_a" in t]
    lines = {line for line in notice.splitlines() if "call_" in line}
    (line_a,) = [line for line in lines if "call_a" in line]
    (line_b,) = [line for line in lines if "call_b" in line]
    assert "applied" in line_a and "not applied" not in line_a.lower() and "saw it in effects.log" in line_a
    assert "not applied" in line_b.lower() and "no trace of it" in line_b
    assert effect_counts(workspace) == {}  # neither call ever ran, and reconciliation re-runs nothing


def test_usage_errors_exit_2_and_start_nothing(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A bad flag, a bad --allow rule and a missing --model exit 2 with a clear message; no session starts."""
    script = write_script(tmp_path / "script.json", [[text("hi")]])
    model = f"script:{script}"
    cases = [
        (["run", "--model", model, "--workspace", str(workspace), "--bogus-flag", "p"], "--bogus-flag"),
        (["run", "--model", model, "--workspace", str(workspace), "--allow", "bash(", "p"], "bash("),
        (["run", "--workspace", str(workspace), "p"], "--model"),
        (["resume"], "SESSION_ID"),
    ]
    procs = parallel(lambda case: strata(cli, *case[0]), cases)
    for (args, mention), proc in zip(cases, procs, strict=True):
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
        assert mention in proc.stderr, (args, proc.stderr)
    assert strata_json(cli, "sessions", "--json") == []


def test_turn_limit_exits_3_incomplete(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """--max-turns 1 with a model that keeps calling tools ends the session incomplete, exit 3."""
    (workspace / "a.txt").write_text("a\n")
    script = write_script(tmp_path / "script.json",
                          [[tool_use(f"t{k}", "read_file", path="a.txt")] for k in range(5)])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--max-turns", "1",
                 "--json", "keep going")
    assert run.returncode == 3, run.stderr
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "incomplete" and summary["exit_code"] == 3
    (row,) = strata_json(cli, "sessions", "--json")
    assert row["status"] == "incomplete"


def test_resume_with_a_higher_turn_limit_continues_an_incomplete_session(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """An incomplete session stays incomplete on a plain resume; `resume --max-turns N` lets it finish."""
    (workspace / "a.txt").write_text("a\n")
    script = write_script(tmp_path / "script.json",
                          [[tool_use(f"t{k}", "read_file", path="a.txt")] for k in range(3)])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--max-turns", "1",
                 "--json", "keep going")
    assert run.returncode == 3, run.stderr
    sid = result_line(run.stdout)["session_id"]
    again = strata(cli, "resume", sid, "--json")
    assert again.returncode == 3, again.stderr
    more = strata(cli, "resume", sid, "--max-turns", "10", "--json")
    assert more.returncode == 0, more.stderr
    assert result_line(more.stdout)["status"] == "completed"
    view = show_in_process(cli, sid)
    assert view["session"]["turns"] == 4  # three tool turns and the final answer
    assert view["session"]["status"] == "completed"


def test_resume_of_a_completed_session_without_prompt_does_nothing(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A prompt-less resume of a completed session calls no model, adds no turn, and leaves it completed."""
    script = write_script(tmp_path / "script.json", [[text("finished")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    assert run.returncode == 0, run.stderr
    sid = result_line(run.stdout)["session_id"]
    before = show_in_process(cli, sid)
    again = strata(cli, "resume", sid, "--json")
    assert again.returncode == 0, again.stderr
    after = show_in_process(cli, sid)
    assert after["messages"] == before["messages"]
    assert after["session"]["turns"] == before["session"]["turns"] == 1
    assert after["session"]["status"] == "completed"


def test_timed_out_effect_exits_5_unknown_pending(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """An effectful call that passes its deadline is unknown (never re-run); the run exits 5."""
    slow = tool_use("slow", "bash", command=f"sleep 5; echo {marker('slow')} >> effects.log", timeout_s=0.5)
    script = write_script(tmp_path / "script.json", [[slow], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS,
                 "--json", "try it")
    assert run.returncode == 5, run.stderr
    summary = result_line(run.stdout)
    assert summary is not None and summary["unknown_receipts"] == 1
    sid = summary["session_id"]
    assert [r["call_id"] for r in strata_json(cli, "receipts", sid, "--status", "unknown", "--json")] == ["slow"]


MALFORMED = {
    "unknown block type": ('[[{"type": "text", "text": "ok"}], [{"type": "tool_call", "name": "bash"}]]',
                           "turn 1, block 0"),
    "input not an object": ('[[{"type": "text", "text": "a"}, {"type": "tool_use", "name": "bash", "input": 3}]]',
                            "turn 0, block 1"),
    "empty turn": ('[[{"type": "text", "text": "a"}], [{"type": "text", "text": "b"}], []]', "turn 2"),
    "not json": ('[[{"type": "text",\n  "text": }]]', "line 2"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_script_is_one_clear_line(cli: StrataCLI, workspace: Path, tmp_path: Path, kind: str) -> None:
    """A malformed script file is a usage error: one line on stderr naming the file and the bad entry."""
    content, entry = MALFORMED[kind]
    script = tmp_path / "bad.json"
    script.write_text(content)
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert proc.returncode == 2, proc.stderr
    (line,) = error_lines(proc.stderr)
    assert str(script) in line and entry in line, line
    assert all(x == line or x.startswith("hint:") for x in proc.stderr.splitlines()), proc.stderr


def test_non_database_file_is_reported_and_left_unchanged(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A file at $STRATA_HOME/strata.db that is not a database is reported (exit 1) and never touched."""
    db = cli.home / "strata.db"
    junk = b"these are my notes, not a database\n" * 200
    db.write_bytes(junk)
    script = write_script(tmp_path / "script.json", [[text("hi")]])
    procs = [strata(cli, "sessions", "--json"),
             strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "hi")]
    for proc in procs:
        assert proc.returncode == 1, (proc.args, proc.stderr)
        (line,) = error_lines(proc.stderr)
        assert str(db) in line and "database" in line, line
    assert db.read_bytes() == junk
    assert sorted(p.name for p in cli.home.iterdir()) == ["strata.db"]


def test_missing_session_id_is_a_clear_error(cli: StrataCLI) -> None:
    """show, resume and receipts of an id that does not exist exit 1 naming the id."""
    missing = "0000-no-such-session"
    for args in (["show", missing, "--json"], ["resume", missing], ["receipts", missing, "--json"]):
        proc = strata(cli, *args)  # one at a time: see test_processes_opening_a_new_database_at_once_all_succeed
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stdout == ""
        (line,) = error_lines(proc.stderr)
        assert missing in line, line


def test_processes_opening_a_new_database_at_once_all_succeed(cli: StrataCLI) -> None:
    """Several processes that find the database not yet migrated at the same moment all succeed."""
    # Staging: the test holds the write lock of a new, empty WAL database, as a first process in the middle of
    # creating the schema would. Three `strata sessions` start, open it (read-only work proceeds under WAL), and
    # wait for the lock; then it is released. Each must create the schema exactly once between them.
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to see when the processes have opened the database")
    cli.home.mkdir(exist_ok=True)
    db = cli.home / "strata.db"
    holder = sqlite3.connect(db, isolation_level=None)
    procs: list[subprocess.Popen[str]] = []
    try:
        assert holder.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        holder.execute("BEGIN IMMEDIATE")
        procs = [cli.popen("sessions", "--json") for _ in range(3)]
        deadline = time.monotonic() + 30
        while not all(holds_open(p.pid, db) or p.poll() is not None for p in procs):
            assert time.monotonic() < deadline, "the processes never opened the database"
            time.sleep(0.02)
        time.sleep(0.3)  # they read the schema version, then queue for the write lock (busy_timeout is 5 s)
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    finished = []
    for p in procs:  # wait for every one of them before any assertion
        out, err = p.communicate(timeout=60)
        finished.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    for proc in finished:
        assert_clean_stderr(proc)
        assert proc.returncode == 0, proc.stderr
        assert json_lines(proc.stdout) == []
