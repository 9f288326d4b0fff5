"""Crash and resume correctness with real `strata` processes: parked calls approved or denied and then
killed at each fault point, resumes with changed rules, a moved workspace, reconciliation done twice or with both
verdicts, forks around an open batch, two resumes racing, decisions taken while a session runs, and kills during
`strata resume` itself.

Effects are counted by bash calls appending a marker line to effects.log. Every scenario runs in its own workspace
and Strata home, the scenarios two at a time in threads (module fixture `seen`, about 40 s on two cores); each test
then asserts on what its scenario recorded. The bugs a review found (a person's denial overruled by a later
allow rule, a decision accepted for a call already started, a prompt dropped by a parked session, a failed command
clobbering the session's status, a resume into a missing workspace, contradictory reconcile verdicts, a reconciled
outcome never reported, a fork's exit code) are fixed; their tests state the behaviour that now holds."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import run_in_process
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    EFFECTS_LOG,
    Call,
    assert_clean_stderr,
    bash_mark,
    check_pairing,
    effect_counts,
    error_lines,
    events_of,
    json_lines,
    kill_after_first_output,
    marker,
    parallel,
    result_line,
    script_calls,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

# A batch whose middle call asks (write_file) and is parked with `--on-ask park`; the bash calls are allowed: p0
# runs before the park, p2 is deferred (decided again and run on resume).
PARK_TURNS = [[text("tidy up"), bash_mark("p0"), tool_use("p1", "write_file", path="out.txt", content="approved\n"),
               bash_mark("p2")],
              [text("done")]]
PARK_FLAGS = ("--allow", "bash", "--on-ask", "park")

# One batch of two effects, then an answer: a kill at after_dispatch:1 leaves k0 run but unrecorded, k1 not started.
CRASH_TURNS = [[text("two marks"), bash_mark("k0"), bash_mark("k1")], [text("done")]]

# Eight small batches for kills during `strata resume` itself.
LONG_TURNS = [[bash_mark(f"l{b}_0", sleep_before=0.04),
               tool_use(f"l{b}_1", "write_file", path=f"w{b}.txt", content=f"batch {b}\n"), bash_mark(f"l{b}_2")]
              for b in range(8)] + [[text("all done")]]

# Park, approve p1, resume killed at a fault point (p1 is dispatched first on resume, then p2), resume again.
APPROVE_FAULTS = ["after_receipt:1", "after_dispatch:1", "before_batch_completed:1"]
RANDOM_SEED = 7031
RESUME_KILLS = 2


# -- scenario plumbing -------------------------------------------------------------------------------------------

@dataclass
class Scene:
    """One scenario: its workspace, every process it ran (by name), and what it noted."""

    cli: StrataCLI
    ws: Path
    scripts: dict[str, Path]
    procs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    sid: str = ""
    error: str = ""

    def run(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = self.cli.run(*args, env=env)
        self.procs[name] = proc
        return proc

    def start(self, name: str, turns: str, *flags: str, env: dict[str, str] | None = None,
              prompt: str = "go") -> subprocess.CompletedProcess[str]:
        return self.run(name, "run", "--model", f"script:{self.scripts[turns]}", "--workspace", str(self.ws), *flags,
                        "--json", prompt, env=env)

    def read(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        """A reading command (`show`, `sessions`), run in this process (tests/_in_process_cli.py): what it prints
        is what the scenario notes, not that it is a process of its own; kept with the processes as `run` keeps
        them (`check_world` checks every one's stderr)."""
        proc = run_in_process(self.cli, *args)
        self.procs[name] = proc
        return proc

    def show(self, name: str, sid: str | None = None) -> dict[str, Any]:
        proc = self.read(name, "show", sid or self.sid, "--json")
        assert proc.returncode == 0, proc.stderr
        (view,) = json_lines(proc.stdout)
        self.notes[name] = view
        return view

    def receipts(self, name: str, sid: str | None = None) -> dict[str, dict[str, Any]]:
        """The session's receipts by call id, read from the database (what `strata receipts --json` lists)."""
        with closing(sqlite3.connect(self.cli.home / "strata.db", timeout=10)) as conn:
            conn.row_factory = sqlite3.Row
            rows = [dict(r) for r in conn.execute("SELECT * FROM receipts WHERE session_id = ?", (sid or self.sid,))]
        by_call = {r["call_id"]: r for r in rows}
        assert len(by_call) == len(rows), f"two receipts for one call: {rows}"
        self.notes[name] = by_call
        return by_call

    def collect(self, sid: str | None = None) -> None:
        """What `check_world` reads: the conversation as `strata show --json` gives it, and the receipts."""
        sid = sid or self.sid
        self.show(f"show:{sid}", sid)
        self.receipts(f"receipts:{sid}", sid)

    def status(self, name: str) -> str:
        proc = self.read(name, "sessions", "--json")
        (row,) = [s for s in json_lines(proc.stdout) if s["id"] == self.sid]
        self.notes[name] = row["status"]
        return str(row["status"])

    def park(self) -> None:
        proc = self.start("park", "park", *PARK_FLAGS)
        assert proc.returncode == 4, (proc.returncode, proc.stderr)
        summary = result_line(proc.stdout)
        assert summary is not None and [p["call_id"] for p in summary["parked"]] == ["p1"], summary
        self.sid = summary["session_id"]

    def crash(self, turns: str = "crash", fault: str = "after_dispatch:1") -> None:
        proc = self.start("killed", turns, *ALLOW_EFFECTS, env={"STRATA_FAULT": fault})
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr)
        self.sid = events_of(proc.stdout)[0]["session_id"]


def results_of(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return check_pairing(view["messages"])


def is_unknown(result: dict[str, Any]) -> bool:
    return bool(result["is_error"]) and result["content"].startswith("Outcome unknown")


def check_world(scene: Scene, calls: list[Call], final: str, *, sid: str | None = None,
                outputs: tuple[str, ...] | None = None, completed: bool = True,
                counts: Counter[str] | None = None) -> dict[str, dict[str, Any]]:
    """What must hold for a session after any crashes and resumes: a valid conversation with one result per call,
    results printed by any process kept, no call with two results across processes, no dispatched receipt left,
    an unknown receipt exactly where the model was told `unknown`, no effect run twice, every effect reported ok
    run once, and an exit code that says whether unknown effects remain."""
    sid = sid or scene.sid
    for proc in scene.procs.values():
        assert_clean_stderr(proc)
    view = scene.notes[f"show:{sid}"]
    results = results_of(view)
    if completed:
        assert view["open_batch"] is None, view["open_batch"]
        assert view["session"]["ended"] == "completed", view["session"]
        assert set(results) == {c.call_id for c in calls}, sorted(results)
    seen: dict[str, str] = {}
    json_runs = [n for n, p in scene.procs.items() if "--json" in p.args and {"run", "resume"} & set(p.args)]
    for name in outputs if outputs is not None else json_runs:
        for ev in events_of(scene.procs[name].stdout):
            if ev["kind"] != "call_result":
                continue
            assert ev["call_id"] not in seen, f"{ev['call_id']}: a result in {seen[ev['call_id']]} and in {name}"
            seen[ev["call_id"]] = name
            assert results[ev["call_id"]]["content"] == ev["content"], f"{ev['call_id']}: result of {name} not kept"
    receipts = scene.notes[f"receipts:{sid}"]
    assert "dispatched" not in {r["status"] for r in receipts.values()}, receipts
    unknown = {cid for cid, r in receipts.items() if r["status"] == "unknown"}
    told = {cid for cid, res in results.items() if is_unknown(res)}
    assert unknown <= told, (unknown, told)  # no spurious unknown receipt
    # ... and none missing: a call the model was told is unknown has an unknown receipt, or one a person or probe
    # reconciled since
    assert all(receipts[cid]["reconciled_by"] for cid in told - unknown), (told, receipts)
    counts = effect_counts(scene.ws) if counts is None else counts
    for c in calls:
        if c.call_id not in results:
            continue
        res, receipt = results[c.call_id], receipts.get(c.call_id)
        if not res["is_error"] and c.effectful:
            assert receipt is not None and receipt["status"] == "done", (c.call_id, receipt)
        if c.tool == "bash":
            assert counts[marker(c.call_id)] <= 1, (c.call_id, counts)
            if not res["is_error"]:
                assert counts[marker(c.call_id)] == 1, (c.call_id, counts)
            if receipt is None:
                assert counts[marker(c.call_id)] == 0, (c.call_id, counts)
    summary = result_line(scene.procs[final].stdout)
    assert summary is not None, scene.procs[final].stdout
    assert summary["unknown_receipts"] == len(unknown), (summary, unknown)
    assert scene.procs[final].returncode == summary["exit_code"] == (5 if unknown else 0), summary
    return results


# -- the scenarios -----------------------------------------------------------------------------------------------

def approve_then_crash(fault: str) -> Callable[[Scene], None]:
    def scenario(s: Scene) -> None:
        s.park()
        assert s.run("approve", "approve", s.sid, "p1").returncode == 0
        s.run("crashed", "resume", s.sid, "--json", env={"STRATA_FAULT": fault})
        if fault == "after_dispatch:1":  # p1 wrote out.txt, then the process died: a person now says "deny"
            s.run("late-deny", "deny", s.sid, "p1", "--reason", "changed my mind")
        s.run("final", "resume", s.sid, "--json")
        s.collect()
    return scenario


def deny_then_crash(s: Scene) -> None:
    s.park()
    assert s.run("deny", "deny", s.sid, "p1", "--reason", "not this file").returncode == 0
    s.run("crashed", "resume", s.sid, "--json", env={"STRATA_FAULT": "after_receipt:1"})  # p2's receipt
    s.run("final", "resume", s.sid, "--json")
    s.collect()


def parked_misuse(s: Scene) -> None:
    """Approve a call that is not parked (a typo), resume with a prompt before deciding, then approve the right
    call and resume with a deny rule for it."""
    s.park()
    s.run("approve", "approve", s.sid, "p9")
    s.status("after-approve")
    s.run("resume", "resume", s.sid, "ALSO-RENAME-THE-FILE", "--json")
    with closing(sqlite3.connect(s.cli.home / "strata.db", timeout=10)) as conn:
        s.notes["log"] = "\n".join(row[0] for row in conn.execute("SELECT payload FROM events"))
    assert s.run("approve-p1", "approve", s.sid, "p1").returncode == 0
    s.run("final", "resume", s.sid, "--deny", "write_file", "--json")
    s.collect()


def rejection_then_allow(s: Scene) -> None:
    s.park()
    assert s.run("deny", "deny", s.sid, "p1", "--reason", "never write out.txt").returncode == 0
    s.run("resume", "resume", s.sid, "--allow", "write_file", "--json")
    s.show("show")


def failed_resume(s: Scene) -> None:
    script = s.ws.parent / "own-script.json"
    s.scripts["own"] = write_script(script, CRASH_TURNS)
    proc = s.start("run", "own", *ALLOW_EFFECTS)
    assert proc.returncode == 0, proc.stderr
    s.sid = events_of(proc.stdout)[0]["session_id"]
    script.unlink()
    s.run("resume", "resume", s.sid, "one more thing")
    s.status("after-resume")


def deny_rule_after_crash(s: Scene) -> None:
    s.crash()
    s.run("resume", "resume", s.sid, "--deny", "bash", "--json")
    s.collect()


def moved_workspace(s: Scene) -> None:
    s.crash()
    moved = s.ws.with_name("ws-moved")
    s.ws.rename(moved)
    try:
        s.run("resume", "resume", s.sid, "--json")
    finally:
        moved.rename(s.ws)
    s.receipts("receipts-after")
    s.run("final", "resume", s.sid, "--json")
    s.collect()


def _unknown_receipt(s: Scene) -> str:
    s.crash()
    resumed = s.run("first-resume", "resume", s.sid, "--json")
    assert resumed.returncode == 5, resumed.stderr
    receipts = s.receipts("receipts-before")
    assert receipts["k0"]["status"] == "unknown"
    return str(receipts["k0"]["id"])


def reconcile_both_verdicts(s: Scene) -> None:
    receipt = _unknown_receipt(s)
    s.run("both", "reconcile", receipt, "--applied", "--not-applied")
    s.receipts("receipts-after")


def reconcile_twice(s: Scene) -> None:
    receipt = _unknown_receipt(s)
    s.notes["receipt"] = receipt
    s.run("applied", "reconcile", receipt, "--applied", "--note", "k0 marker is in effects.log")
    s.run("again-not", "reconcile", receipt, "--not-applied")
    s.receipts("receipts-after")
    s.run("as-hinted", "resume", s.sid, "--json")  # what `strata reconcile` told the person to run
    s.run("final", "resume", s.sid, "carry on", "--json")
    s.collect()


def _event_count(s: Scene) -> int:
    with closing(sqlite3.connect(s.cli.home / "strata.db", timeout=10)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM session_events WHERE session_id = ?", (s.sid,)).fetchone()[0])


def forks(s: Scene) -> None:
    s.crash()
    killed = events_of(s.procs["killed"].stdout)
    proposed = next(e["seq"] for e in killed if e["kind"] == "batch_proposed")
    s.notes["proposed"] = proposed
    s.run("fork-inside", "fork", s.sid, "--at-event", str(proposed), "--json")
    with closing(sqlite3.connect(s.cli.home / "strata.db", timeout=10)) as conn:
        s.notes["sessions-after-refusal"] = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    early = s.run("fork-before", "fork", s.sid, "--at-event", str(proposed - 1), "--json")
    assert early.returncode == 0, early.stderr
    s.notes["early"] = json_lines(early.stdout)[0]["session_id"]
    s.run("final", "resume", s.sid, "--json")
    s.notes["counts-parent"] = effect_counts(s.ws)
    s.notes["parent-events"] = _event_count(s)
    closed = next(e["seq"] for e in events_of(s.procs["final"].stdout) if e["kind"] == "batch_completed")
    late = s.run("fork-after", "fork", s.sid, "--at-event", str(closed), "--json")
    assert late.returncode == 0, late.stderr
    s.notes["late"] = json_lines(late.stdout)[0]["session_id"]
    s.run("late-resume", "resume", s.notes["late"], "carry on", "--json")
    s.notes["counts-late"] = effect_counts(s.ws)
    s.run("early-resume", "resume", s.notes["early"], "--json")
    s.notes["counts-early"] = effect_counts(s.ws)
    s.notes["parent-unchanged"] = _event_count(s) == s.notes["parent-events"]
    s.collect()


def racing_resumes(s: Scene) -> None:
    s.crash()
    procs = [s.cli.popen("resume", s.sid, "--json") for _ in range(2)]
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=60)
        s.procs[f"racer{i}"] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    s.collect()


def _wait_for_receipt(home: Path, call_id: str, status: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with closing(sqlite3.connect(home / "strata.db", timeout=10)) as conn:
            row = conn.execute("SELECT id, status FROM receipts WHERE call_id = ?", (call_id,)).fetchone()
        if row is not None and row[1] == status:
            return str(row[0])
        time.sleep(0.05)
    raise AssertionError(f"receipt of {call_id} never became {status}")


def decisions_while_running(s: Scene) -> None:
    proc = s.start("park", "busy", *PARK_FLAGS)
    assert proc.returncode == 4, proc.stderr
    summary = result_line(proc.stdout)
    assert summary is not None
    s.sid = summary["session_id"]
    assert s.run("approve", "approve", s.sid, "q1").returncode == 0
    running = s.cli.popen("resume", s.sid, "--json")
    try:
        receipt = _wait_for_receipt(s.cli.home, "q2", "dispatched")  # q2 waits for `release`
        s.notes["receipt"] = receipt
        during = parallel(lambda args: s.cli.run(*args), [
            ("deny", s.sid, "q1", "--reason", "too late"),
            ("reconcile", receipt, "--not-applied"), ("resume", s.sid, "--json")], workers=4)
        for name, proc in zip(("deny-live", "reconcile-live", "resume-live"), during, strict=True):
            s.procs[name] = proc
    finally:
        (s.ws / "release").touch()
        try:
            out, err = running.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            running.kill()
            raise
    s.procs["final"] = subprocess.CompletedProcess(running.args, running.returncode, out, err)
    s.collect()


def _popen_and_kill(s: Scene, name: str, delay: float, *args: str) -> None:
    s.procs[name] = kill_after_first_output(s.cli.popen(*args), delay)


def killed_during_resume(delay: float) -> Callable[[Scene], None]:
    def scenario(s: Scene) -> None:
        s.crash("long", "after_dispatch:2")
        _popen_and_kill(s, "killed-resume", delay, "resume", s.sid, "--json")
        s.run("final", "resume", s.sid, "--json")
        s.collect()
    return scenario


_rng = random.Random(RANDOM_SEED)
RESUME_DELAYS = [round(_rng.uniform(0.05, 0.45), 3) for _ in range(RESUME_KILLS)]

SCENARIOS: dict[str, Callable[[Scene], None]] = {
    **{f"approve-{f}": approve_then_crash(f) for f in APPROVE_FAULTS},
    "deny-then-crash": deny_then_crash,
    "parked-misuse": parked_misuse,
    "rejection-then-allow": rejection_then_allow,
    "failed-resume": failed_resume,
    "deny-rule-after-crash": deny_rule_after_crash,
    "moved-workspace": moved_workspace,
    "reconcile-both": reconcile_both_verdicts,
    "reconcile-twice": reconcile_twice,
    "forks": forks,
    "racing-resumes": racing_resumes,
    "decisions-while-running": decisions_while_running,
    **{f"killed-resume-{i}": killed_during_resume(d) for i, d in enumerate(RESUME_DELAYS)},
}

# q2 waits (up to 60 s) until the test creates `release`, then appends its marker: the session is live meanwhile.
BUSY_TURNS = [[text("write, then a gated mark"), tool_use("q1", "write_file", path="q.txt", content="q\n"),
               tool_use("q2", "bash", command=f"for i in $(seq 1200); do [ -e release ] && break; sleep 0.05; done; "
                                              f"echo {marker('q2')} >> {EFFECTS_LOG}")],
              [text("done")]]


# One module fixture plays dozens of strata processes before the first test: on a loaded 2-core machine that
# alone can pass the suite's 120 s per-test limit, so this module's tests get more (each test's own checks are fast).
pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scene]:
    base = tmp_path_factory.mktemp("resume-review")
    scripts = {name: write_script(base / f"{name}.json", turns) for name, turns in
               (("park", PARK_TURNS), ("crash", CRASH_TURNS), ("long", LONG_TURNS), ("busy", BUSY_TURNS))}
    scenes: dict[str, Scene] = {}
    for name in SCENARIOS:
        ws = base / name / "ws"
        ws.mkdir(parents=True)
        # A Strata home each: the scenarios' processes never wait on one another's SQLite write lock.
        scenes[name] = Scene(StrataCLI(base / name / "home", base / name), ws, dict(scripts))

    def play(name: str) -> None:
        try:
            SCENARIOS[name](scenes[name])
        except Exception:
            scenes[name].error = traceback.format_exc()

    # The slow ones first, so they overlap with the rest.
    order = sorted(SCENARIOS, key=lambda n: n not in ("decisions-while-running", "forks", "reconcile-twice"))
    parallel(play, order, workers=2)
    return scenes


def scene(seen: dict[str, Scene], name: str) -> Scene:
    s = seen[name]
    assert not s.error, s.error
    return s


# -- parked calls: approve or deny, then a kill at each fault point, then resume ---------------------------------

EXPECTED_UNKNOWN = {"after_receipt:1": {"p1"}, "after_dispatch:1": {"p1"}, "before_batch_completed:1": {"p2"}}


@pytest.mark.parametrize("fault", APPROVE_FAULTS)
def test_approved_call_killed_at_a_fault_point_runs_at_most_once(seen: dict[str, Scene], fault: str) -> None:
    """Park, approve, kill the resume at a fault point, resume again: the call killed after its receipt is unknown
    (never re-run), every other call has one result, finished results are kept, the approved write happened at most
    once, and the call deferred behind the park runs once. (At after_dispatch:1 a person also runs `strata deny`
    between the kill and the resume: the receipt still wins, p1 stays unknown.)"""
    s = scene(seen, f"approve-{fault}")
    assert s.procs["crashed"].returncode == -signal.SIGKILL, s.procs["crashed"].stderr
    results = check_world(s, script_calls(PARK_TURNS), "final")
    assert {cid for cid, r in results.items() if is_unknown(r)} == EXPECTED_UNKNOWN[fault]
    counts = effect_counts(s.ws)
    assert counts[marker("p0")] == 1 and not results["p0"]["is_error"]
    assert counts[marker("p2")] == 1
    out = s.ws / "out.txt"
    assert out.exists() == (fault != "after_receipt:1")
    if out.exists():
        assert out.read_text() == "approved\n"


def test_denied_parked_call_stays_denied_through_a_crash(seen: dict[str, Scene]) -> None:
    """`strata deny` then a resume killed at the next receipt: the denial with its reason reaches the model, the
    denied call never gets a receipt or runs, the deferred call that was killed is unknown."""
    s = scene(seen, "deny-then-crash")
    assert s.procs["crashed"].returncode == -signal.SIGKILL
    results = check_world(s, script_calls(PARK_TURNS), "final")
    assert results["p1"]["is_error"] and "not this file" in results["p1"]["content"]
    assert "rejected by person:" in results["p1"]["content"]
    assert is_unknown(results["p2"]) and effect_counts(s.ws)[marker("p2")] == 0
    assert not (s.ws / "out.txt").exists()
    assert "p1" not in s.notes[f"receipts:{s.sid}"]


def test_deny_after_the_approved_call_started_is_refused(seen: dict[str, Scene]) -> None:
    s = scene(seen, "approve-after_dispatch:1")
    assert (s.ws / "out.txt").exists()
    late = s.procs["late-deny"]
    assert late.returncode != 0, late.stdout
    (line,) = error_lines(late.stderr)
    assert "p1" in line and ("receipt" in late.stderr or "reconcile" in late.stderr), late.stderr


def test_parked_session_misuse_runs_nothing_undecided_and_a_deny_rule_beats_an_approval(
        seen: dict[str, Scene]) -> None:
    """Resuming a parked session with a prompt before any decision runs nothing new and leaves p1 waiting; once
    p1 is approved, `resume --deny write_file` still denies it (deny beats a person's approval), p2 runs once."""
    s = scene(seen, "parked-misuse")
    assert s.procs["resume"].returncode in (2, 4), s.procs["resume"].stderr
    results = check_world(s, script_calls(PARK_TURNS), "final")
    assert results["p1"]["content"].startswith("Denied by the policy check"), results["p1"]
    assert not (s.ws / "out.txt").exists()
    assert effect_counts(s.ws) == {marker("p0"): 1, marker("p2"): 1}


def test_resume_with_a_prompt_of_a_parked_session_keeps_or_refuses_the_prompt(seen: dict[str, Scene]) -> None:
    s = scene(seen, "parked-misuse")
    proc = s.procs["resume"]
    kept = "ALSO-RENAME-THE-FILE" in s.notes["log"]
    refused = proc.returncode not in (0, 4) and len(error_lines(proc.stderr)) == 1
    assert kept or refused, (proc.returncode, proc.stdout[-400:], proc.stderr)


def test_a_recorded_rejection_stands_against_an_allow_rule_added_on_resume(seen: dict[str, Scene]) -> None:
    s = scene(seen, "rejection-then-allow")
    assert s.procs["resume"].returncode == 0, s.procs["resume"].stderr
    p1 = results_of(s.notes["show"])["p1"]
    assert not (s.ws / "out.txt").exists()
    assert p1["is_error"] and "never write out.txt" in p1["content"], p1


@pytest.mark.parametrize(("name", "first", "failed", "status"), [
    pytest.param("parked-misuse", "park", "approve", "awaiting_approval"),
    pytest.param("failed-resume", "run", "resume", "completed"),
])
def test_a_failed_command_leaves_the_session_status_as_it_was(seen: dict[str, Scene], name: str, first: str,
                                                              failed: str, status: str) -> None:
    s = scene(seen, name)
    summary = result_line(s.procs[first].stdout)
    assert summary is not None and summary["status"] == status
    proc = s.procs[failed]
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1, proc.stderr
    assert s.notes[f"after-{failed}"] == status


# -- resume with changed rules, a moved workspace ----------------------------------------------------------------

def test_a_deny_rule_on_resume_never_turns_a_started_call_into_a_denial(seen: dict[str, Scene]) -> None:
    """`strata resume --deny bash` after a kill: the call that was dispatched stays unknown (it may have run; a
    denial would say no effect started), the call that never started is denied and never runs."""
    s = scene(seen, "deny-rule-after-crash")
    results = check_world(s, script_calls(CRASH_TURNS), "resume")
    assert is_unknown(results["k0"]) and effect_counts(s.ws)[marker("k0")] == 1
    assert results["k1"]["content"].startswith("Denied by the policy check")
    assert effect_counts(s.ws)[marker("k1")] == 0


def test_resume_in_a_moved_workspace_runs_no_effect_twice(seen: dict[str, Scene]) -> None:
    """Whatever resume does while the workspace is gone, no effect runs twice, nothing is lost, and resuming
    after the workspace is back is consistent."""
    s = scene(seen, "moved-workspace")
    results = check_world(s, script_calls(CRASH_TURNS), "final")
    assert is_unknown(results["k0"]) and effect_counts(s.ws)[marker("k0")] == 1


def test_resume_refuses_a_missing_workspace_and_keeps_the_open_batch(seen: dict[str, Scene]) -> None:
    s = scene(seen, "moved-workspace")
    proc = s.procs["resume"]
    assert proc.returncode not in (0, 5), proc.stdout
    (line,) = error_lines(proc.stderr)
    assert str(s.ws) in line, line
    assert not [e for e in events_of(proc.stdout) if e["kind"] in ("call_result", "batch_completed")]
    assert "k1" not in s.notes["receipts-after"]  # k1 never started while the workspace was gone
    assert effect_counts(s.ws)[marker("k1")] == 1  # it ran once the workspace was back


# -- reconciliation -----------------------------------------------------------------------------------------------

def test_reconcile_with_both_verdicts_is_a_usage_error(seen: dict[str, Scene]) -> None:
    s = scene(seen, "reconcile-both")
    assert effect_counts(s.ws)[marker("k0")] == 1
    both = s.procs["both"]
    assert both.returncode == 2, both.stdout
    assert s.notes["receipts-after"]["k0"]["status"] == "unknown"


def test_reconcile_twice_is_refused_and_the_model_hears_once(seen: dict[str, Scene]) -> None:
    """The first verdict stands: a second `reconcile` (either way) is one error line and changes nothing; after a
    resume with a prompt the model has been told the reconciled outcome exactly once, and nothing re-ran."""
    s = scene(seen, "reconcile-twice")
    assert s.procs["applied"].returncode == 0, s.procs["applied"].stderr
    again = s.procs["again-not"]
    assert again.returncode == 1, again.stdout
    (line,) = error_lines(again.stderr)
    assert "was already reconciled as applied by person:" in line, line
    assert "a recorded decision is not changed" in line, line
    receipt = s.notes["receipts-after"]["k0"]
    assert (receipt["status"], receipt["note"]) == ("done", "k0 marker is in effects.log")
    assert receipt["reconciled_by"].startswith("person:")
    check_world(s, script_calls(CRASH_TURNS), "final")
    text_blocks = [b["text"] for m in s.notes[f"show:{s.sid}"]["messages"] for b in m["content"]
                   if b["type"] == "text"]
    assert sum("reconciled as applied" in t for t in text_blocks) == 1, text_blocks
    assert effect_counts(s.ws) == {marker("k0"): 1, marker("k1"): 1}


def test_resume_as_hinted_after_reconcile_tells_the_model(seen: dict[str, Scene]) -> None:
    s = scene(seen, "reconcile-twice")
    assert f"strata resume {s.sid}" in s.procs["applied"].stdout
    assert "PROMPT" not in s.procs["applied"].stdout
    told = [e for e in events_of(s.procs["as-hinted"].stdout) if e["kind"] == "user_message"]
    assert any("reconciled as applied" in e["text"] for e in told), s.procs["as-hinted"].stdout


# -- forks around an open batch ------------------------------------------------------------------------------------

def test_forks_around_an_open_batch_never_rerun_a_recorded_effect(seen: dict[str, Scene]) -> None:
    """A fork inside the crashed parent's open batch is refused (exit 2, naming the boundary) and makes no session.
    A fork taken after the batch closed does not run its effects again; a fork taken before the batch (before any
    receipt) runs it afresh, which is the fork's own new attempt. The parent is unchanged by the forks' runs."""
    s = scene(seen, "forks")
    inside = s.procs["fork-inside"]
    assert inside.returncode == 2, inside.stdout
    (line,) = error_lines(inside.stderr)
    assert "is open there" in line and "still open" in line, line
    assert f"--at-event {s.notes['proposed'] - 1}" in inside.stderr
    assert s.notes["sessions-after-refusal"] == 1
    check_world(s, script_calls(CRASH_TURNS), "final", outputs=("killed", "final"), counts=s.notes["counts-parent"])
    assert s.notes["counts-parent"] == {marker("k0"): 1, marker("k1"): 1}

    late = s.procs["late-resume"]
    assert_clean_stderr(late)
    assert late.returncode in (0, 5), late.stderr
    assert not [e for e in events_of(late.stdout) if e["kind"] == "call_result"]
    assert s.notes["counts-late"] == s.notes["counts-parent"]

    early = s.procs["early-resume"]
    assert early.returncode == 0, early.stderr
    ran = {e["call_id"]: e["status"] for e in events_of(early.stdout) if e["kind"] == "call_result"}
    assert ran == {"k0": "ok", "k1": "ok"}
    assert s.notes["counts-early"] == {marker("k0"): 2, marker("k1"): 2}
    assert s.notes["parent-unchanged"]


def test_resumed_fork_exit_code_agrees_with_its_unknown_outcome(seen: dict[str, Scene]) -> None:
    s = scene(seen, "forks")
    summary = result_line(s.procs["late-resume"].stdout)
    assert summary is not None
    assert "unknown outcome" in summary["reason"], summary
    assert summary["unknown_receipts"] == 1 and summary["exit_code"] == 5, summary


# -- concurrency: racing resumes, decisions while a session runs ---------------------------------------------------

def test_two_racing_resumes_finish_the_batch_once(seen: dict[str, Scene]) -> None:
    """Two `strata resume` started together after a kill: one drives the session, the other is told the session
    is active (or, if it came second, finds nothing to do); no call gets two results and no effect runs twice."""
    s = scene(seen, "racing-resumes")
    worked = [n for n in ("racer0", "racer1")
              if any(e["kind"] == "call_result" for e in events_of(s.procs[n].stdout))]
    assert len(worked) == 1, {n: (s.procs[n].returncode, s.procs[n].stderr) for n in ("racer0", "racer1")}
    (other,) = {"racer0", "racer1"} - set(worked)
    loser = s.procs[other]
    if loser.returncode == 1:
        (line,) = error_lines(loser.stderr)
        assert "is active in another process" in line, line
    else:
        summary = result_line(loser.stdout)
        assert summary is not None and "nothing to do" in summary["reason"], loser.stdout
    check_world(s, script_calls(CRASH_TURNS), worked[0])


def test_decisions_while_the_session_runs_are_refused(seen: dict[str, Scene]) -> None:
    """While a resumed session runs (its lease held by a live process), `approve`, `deny` and a second `resume`
    are one 'is active' error line, `reconcile` of its in-flight receipt is refused; nothing they tried is
    recorded, and the run finishes every call once."""
    s = scene(seen, "decisions-while-running")
    for name in ("deny-live", "resume-live"):
        proc = s.procs[name]
        assert proc.returncode == 1, (name, proc.stdout)
        (line,) = error_lines(proc.stderr)
        assert "is active in another process" in line, (name, line)
    rec = s.procs["reconcile-live"]
    assert rec.returncode == 1 and "running now" in rec.stderr, rec.stderr
    results = check_world(s, script_calls(BUSY_TURNS), "final")
    assert not results["q1"]["is_error"] and (s.ws / "q.txt").read_text() == "q\n"
    assert not results["q2"]["is_error"] and effect_counts(s.ws)[marker("q2")] == 1
    receipts = s.notes[f"receipts:{s.sid}"]
    assert receipts["q2"]["status"] == "done" and receipts["q2"]["reconciled_by"] is None


# -- kills during `strata resume` itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("i", range(RESUME_KILLS))
def test_resume_killed_at_a_random_moment_then_resumed_again(seen: dict[str, Scene], i: int) -> None:
    """A run killed mid-batch, its resume killed after a seeded random delay, a second resume: the same invariants
    as any crash (no effect twice, every result kept, unknown receipts exactly where the model was told)."""
    s = scene(seen, f"killed-resume-{i}")
    assert s.procs["killed-resume"].returncode in (-signal.SIGKILL, 0, 5), s.procs["killed-resume"].stderr
    check_world(s, script_calls(LONG_TURNS), "final")
    for b in range(8):
        path = s.ws / f"w{b}.txt"
        assert not path.exists() or path.read_text() == f"batch {b}\n"


def test_some_resume_was_killed_mid_session(seen: dict[str, Scene]) -> None:
    """The random kills must interrupt real work, or the tests above prove little."""
    killed = [n for n in (f"killed-resume-{i}" for i in range(RESUME_KILLS))
              if seen[n].procs.get("killed-resume") is not None
              and seen[n].procs["killed-resume"].returncode == -signal.SIGKILL
              and not any(e["kind"] == "session_ended" for e in events_of(seen[n].procs["killed-resume"].stdout))]
    assert killed, RESUME_DELAYS
