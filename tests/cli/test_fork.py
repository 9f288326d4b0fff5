"""`strata fork ID --at-event SEQ` with real processes: the fork starts from the parent's log up to a batch boundary,
records its parent, resumes from the fork point with the scripted model continuing at the right turn, never
re-runs an effect from before the fork point, and leaves the parent untouched. A seq inside an open batch is a
usage error naming the nearest boundaries; an unknown session is one error line."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests._terminal import CHAT_SESSION, answer, leave_chat
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    bash_mark,
    effect_counts,
    error_lines,
    events_of,
    marker,
    result_line,
    strata,
    strata_json,
    strata_read,
    strata_set_up,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

TURNS = [[text("First batch."), bash_mark("a1"), bash_mark("a2")],
         [text("Second batch."), bash_mark("b1"), bash_mark("b2")],
         [text("done")]]


@dataclass
class Parent:
    cli: StrataCLI
    workspace: Path
    session_id: str
    events: list[dict[str, Any]]

    def seq_of(self, kind: str, nth: int = 0) -> int:
        return [e["seq"] for e in self.events if e["kind"] == kind][nth]


@pytest.fixture
def parent(cli: StrataCLI, workspace: Path, tmp_path: Path) -> Parent:
    """The session the tests fork: made in this process (tests/_in_process_cli.py), the forks are processes."""
    script = write_script(tmp_path / "script.json", TURNS)
    run = strata_set_up(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS,
                        "--json", "mark twice")
    assert run.returncode == 0, run.stderr
    events = events_of(run.stdout)
    return Parent(cli, workspace, events[0]["session_id"], events)


def fork_json(p: Parent, seq: int) -> dict[str, Any]:
    (out,) = strata_json(p.cli, "fork", p.session_id, "--at-event", str(seq), "--json")
    return out


def state_of(cli: StrataCLI, session_id: str) -> dict[str, Any]:
    """Everything `strata` can tell about a session: show, timeline and receipts."""
    return {"show": show_in_process(cli, session_id),
            "timeline": json_lines_in_process(cli, "timeline", session_id, "--json"),
            "receipts": json_lines_in_process(cli, "receipts", session_id, "--json")}


def test_fork_copies_the_log_up_to_a_batch_boundary(parent: Parent) -> None:
    """The fork holds the parent's conversation up to the first batch, records its parent, owns no receipts, and
    its timeline opens with a `forked` row whose chain verifies."""
    at = parent.seq_of("batch_completed", 0)
    out = fork_json(parent, at)
    new = out["session_id"]
    assert new != parent.session_id
    assert (out["type"], out["parent_id"], out["fork_seq"], out["events"], out["turns"], out["status"]) == (
        "fork", parent.session_id, at, at, 1, "idle")
    assert out["resume"] == f"strata resume {new} PROMPT"
    view, original = show_in_process(parent.cli, new), show_in_process(parent.cli, parent.session_id)
    assert view["messages"] == original["messages"][:3]
    assert (view["session"]["last_seq"], view["session"]["turns"], view["open_batch"]) == (at, 1, None)
    assert view["session"]["parent_id"] == parent.session_id
    listed = {s["id"]: s for s in json_lines_in_process(parent.cli, "sessions", "--json")}
    assert listed[new]["parent_id"] == parent.session_id and listed[new]["status"] == "idle"
    assert json_lines_in_process(parent.cli, "receipts", new, "--json") == []
    (row,) = json_lines_in_process(parent.cli, "timeline", new, "--json")
    assert (row["kind"], row["outcome"], row["data"]["parent_id"], row["data"]["fork_seq"]) == (
        "lifecycle", "forked", parent.session_id, at)
    assert strata_read(parent.cli, "timeline", new, "--verify").returncode == 0
    with closing(sqlite3.connect(parent.cli.home / "strata.db")) as conn:
        assert conn.execute("SELECT parent_id, fork_seq FROM sessions WHERE id = ?", (new,)).fetchone() == (
            parent.session_id, at)
    started = json_lines_in_process(parent.cli, "export", new, "--format", "jsonl")[1]
    assert (started["kind"], started["session_id"], started["parent_id"]) == ("session_started", new,
                                                                           parent.session_id)


def test_resumed_fork_continues_from_the_fork_point_without_rerunning_effects(parent: Parent) -> None:
    """Resuming the fork runs the second batch again (in the fork) and the final turn; the first batch's effects
    ran once, the parent is unchanged."""
    before = state_of(parent.cli, parent.session_id)
    assert effect_counts(parent.workspace) == {marker(c): 1 for c in ("a1", "a2", "b1", "b2")}
    new = fork_json(parent, parent.seq_of("batch_completed", 0))["session_id"]

    resume = strata(parent.cli, "resume", new, "carry on", "--json")
    assert resume.returncode == 0, resume.stderr
    summary = result_line(resume.stdout)
    assert summary is not None and (summary["session_id"], summary["status"]) == (new, "completed")
    ran = [e["call_id"] for e in events_of(resume.stdout) if e["kind"] == "call_result"]
    assert ran == ["b1", "b2"]

    assert effect_counts(parent.workspace) == {marker("a1"): 1, marker("a2"): 1, marker("b1"): 2, marker("b2"): 2}
    original = before["show"]["messages"]
    messages = show_in_process(parent.cli, new)["messages"]
    assert messages[:2] == original[:2]
    assert messages[2]["content"] == [*original[2]["content"], {"type": "text", "text": "carry on"}]
    assert [b.get("id") for b in messages[3]["content"] if b["type"] == "tool_use"] == ["b1", "b2"]
    assert messages[-1] == {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    assert [r["call_id"] for r in json_lines_in_process(parent.cli, "receipts", new, "--json")] == ["b1", "b2"]
    assert state_of(parent.cli, parent.session_id) == before


def test_fork_inside_an_open_batch_is_a_usage_error(parent: Parent) -> None:
    """A seq between a batch_proposed and its batch_completed exits 2 naming the boundaries on either side;
    no session is made."""
    proposed = parent.seq_of("batch_proposed", 1)
    closed = parent.seq_of("batch_completed", 1)
    previous = parent.seq_of("batch_completed", 0)
    sessions = json_lines_in_process(parent.cli, "sessions", "--json")
    for inside in (proposed, proposed + 1):
        proc = strata(parent.cli, "fork", parent.session_id, "--at-event", str(inside))
        assert proc.returncode == 2, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert f"seq {inside}" in line and "is open there" in line, line
        assert f"seq {previous} and seq {closed}" in line, line
        assert f"--at-event {closed}" in proc.stderr
    assert json_lines_in_process(parent.cli, "sessions", "--json") == sessions


@pytest.mark.parametrize("seq", ["0", "999"])
def test_fork_outside_the_log_is_a_usage_error(parent: Parent, seq: str) -> None:
    """A seq before the first event or past the last exits 2 saying which seqs exist."""
    proc = strata(parent.cli, "fork", parent.session_id, "--at-event", seq)
    assert proc.returncode == 2, proc.stderr
    (line,) = error_lines(proc.stderr)
    assert f"seqs 1 to {parent.events[-1]['seq']}" in line, line


def test_fork_of_an_unknown_session_is_one_error_line(cli: StrataCLI) -> None:
    """An unknown id exits 1 with one error line naming it; nothing is printed on stdout."""
    proc = strata(cli, "fork", "no-such-session", "--at-event", "3")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    (line,) = error_lines(proc.stderr)
    assert "no-such-session" in line


def test_fork_prints_how_to_resume(parent: Parent) -> None:
    """Without --json the new id and the resume command are printed; forking the last event copies it all."""
    last = parent.events[-1]["seq"]
    proc = strata(parent.cli, "fork", parent.session_id, "--at-event", str(last))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    new = json_lines_in_process(parent.cli, "sessions", "--json")[-1]["id"]
    assert lines[0].startswith(f"forked session {parent.session_id} at event {last} into {new}")
    assert lines[1] == f"resume it: strata resume {new} PROMPT"
    assert show_in_process(parent.cli, new)["session"]["ended"] == "completed"


def test_fork_names_the_always_approvals_it_inherits(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A person's "always" for write_file in the parent holds in a fork too: the fork says so (text and --json)
    instead of only "inherits no session rules", and a headless resume of the fork writes without asking."""
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_a", "write_file", path="a.txt", content="A\n")],
        [text("wrote a")],
        [tool_use("toolu_b", "write_file", path="b.txt", content="B\n")],
        [text("wrote b")],
    ])
    child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace))
    child.expect(CHAT_SESSION)
    session_id = child.match.group(1)
    child.expect("strata>")
    child.sendline("write a")
    answer(child, "write_file", "a")
    child.expect("assistant: wrote a")
    leave_chat(child, session_id)

    fork = strata(cli, "fork", session_id, "--at-turn", "2")
    assert fork.returncode == 0, fork.stderr
    assert "the fork inherits no session rules" in fork.stdout
    assert 'the fork inherits the "always" approvals of the log it copied: write_file by person:' in fork.stdout
    (as_json,) = strata_json(cli, "fork", session_id, "--at-turn", "2", "--json")
    assert [g.split(" by ")[0] for g in as_json["inherited_grants"]] == ["write_file"], as_json
    (fork_id,) = [line.split(" into ")[1].split()[0] for line in fork.stdout.splitlines() if " into " in line]
    resumed = strata(cli, "resume", fork_id, "write b")  # headless, no --allow: the inherited grant approves it
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "b.txt").read_text() == "B\n"


def test_fork_at_the_end_of_an_unfinished_turn_is_a_usage_error(cli: StrataCLI, workspace: Path,
                                                                tmp_path: Path) -> None:
    """`--at-turn T` where turn T has not ended (its batch is parked for a person) is refused in one line naming
    the last point before it, and creates no session: before, it forked silently at the end of turn T-1, a fork
    without the turn that was asked for."""
    script = write_script(tmp_path / "park.json", [[text("p"), bash_mark("p1")], [text("after")]])
    run = strata_set_up(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park",
                        "--json", "park me")
    assert run.returncode == 4, run.stderr
    sid = str((result_line(run.stdout) or {})["session_id"])
    fork = strata(cli, "fork", sid, "--at-turn", "1")
    assert fork.returncode == 2, fork.stdout
    (line,) = error_lines(fork.stderr)
    assert "turn 1" in line and "has not ended" in line and "the last point before it is event 2" in line, line
    assert "Traceback" not in fork.stderr and "--points" in fork.stderr
    assert [s["id"] for s in json_lines_in_process(cli, "sessions", "--json")] == [sid]
    assert strata(cli, "fork", sid, "--at-turn", "0").returncode == 0  # the turn before it is still a fork point
