"""Ids as people type them and the hints that name them (issue 15), with the real `strata` and the scripted model:
a session by a unique prefix (at least 8 characters) or `last`, an ambiguous prefix listing its candidates, a short
one refused; a receipt by its call's id; `fork --points` and `fork --at POSITION`; `approve --all`; Ctrl-C exiting
130 with a hint naming resume and reconcile; and the listings' fixed messages (one line per denied call, `not
applied`, counts that agree, `--kind`, `--version`, `--verbose` after the subcommand, run's default model)."""

from __future__ import annotations

import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._groups import finish, wait_for
from tests.cli._helpers import (
    error_lines,
    result_line,
    strata,
    strata_json,
    strata_read,
    strata_set_up,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script


def _run(cli: StrataCLI, workspace: Path, script: Path, *args: str, prompt: str = "go") -> tuple[str, Any]:
    """A session these tests then name, decide on or fork: made in this process (tests/_in_process_cli.py)."""
    proc = strata_set_up(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *args, "--json",
                         prompt)
    result = result_line(proc.stdout)
    assert result is not None, proc.stderr
    return result["session_id"], proc


def _hello(tmp_path: Path) -> Path:
    return write_script(tmp_path / "hello.json", [[text("hello")]])


def _two_sharing_a_prefix(cli: StrataCLI, workspace: Path, tmp_path: Path) -> tuple[str, str]:
    """Two sessions whose ids share at least 8 characters (UUIDv7: made within the same ~65 s)."""
    ids = [_run(cli, workspace, _hello(tmp_path))[0]]
    while True:
        ids.append(_run(cli, workspace, _hello(tmp_path))[0])
        if ids[-1][:8] == ids[-2][:8]:
            return ids[-2], ids[-1]


def _shortest_unique(mine: str, other: str) -> str:
    n = 8
    while other.startswith(mine[:n]):
        n += 1
    return mine[:n]


@dataclass(frozen=True)
class Made:
    """Homes made once for the module by real `strata` runs, copied into a test's own home by `copied`."""

    prefix_home: Path
    prefix_ids: tuple[str, str]
    """Two sessions whose ids share at least 8 characters."""
    parked_home: Path
    parked_id: str
    """A session parked on two writes (PARKED), nothing decided."""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    homes = {}
    for name in ("prefix", "parked"):
        base = tmp_path_factory.mktemp(f"ids-{name}")
        for sub in ("home", "ws"):
            (base / sub).mkdir()
        homes[name] = (StrataCLI(base / "home", base), base)
    (prefix, base) = homes["prefix"]
    ids = _two_sharing_a_prefix(prefix, base / "ws", base)
    (parked, base) = homes["parked"]
    return Made(prefix.home, ids, parked.home, _parked(parked, base / "ws", base))


def copied(cli: StrataCLI, home: Path) -> None:
    """A module-made home copied into the test's (no process has it open): what the test records stays its own."""
    shutil.copytree(home, cli.home, dirs_exist_ok=True)


def test_a_unique_prefix_names_the_session_in_every_command(cli: StrataCLI, made: Made) -> None:
    """show, timeline, receipts, export and resume take a unique prefix of at least 8 characters."""
    copied(cli, made.prefix_home)
    first, second = made.prefix_ids
    prefix = _shortest_unique(second, first)
    assert cli.show(prefix)["session"]["id"] == second
    rows = strata_json(cli, "timeline", prefix, "--json")
    assert rows and {r["session_id"] for r in rows} == {second}
    assert strata_json(cli, "receipts", prefix, "--json") == []
    exported = strata_json(cli, "export", prefix, "--format", "jsonl")
    assert exported[0]["type"] == "session" and exported[0]["session"]["id"] == second
    resumed = strata(cli, "resume", prefix, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert result_line(resumed.stdout)["session_id"] == second  # type: ignore[index]


def test_an_ambiguous_prefix_lists_the_candidates(cli: StrataCLI, made: Made) -> None:
    copied(cli, made.prefix_home)
    first, second = made.prefix_ids
    common = _shortest_unique(first, second)[:-1]  # what both ids begin with (8 characters at least)
    proc = strata(cli, "show", common)
    assert proc.returncode == 2, proc.stderr
    assert f"session id prefix {common!r} names" in proc.stderr
    assert first in proc.stderr and second in proc.stderr and "updated" in proc.stderr
    assert "hint: give more characters of the id" in proc.stderr
    assert proc.stdout == ""


def test_a_prefix_shorter_than_8_characters_is_a_usage_error(cli: StrataCLI, workspace: Path,
                                                             tmp_path: Path) -> None:
    sid, _ = _run(cli, workspace, _hello(tmp_path))
    proc = strata(cli, "show", sid[:7])
    assert proc.returncode == 2, proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "too short" in line and "at least 8 characters" in line
    unknown = strata(cli, "show", "ffffffff-no-such")
    assert unknown.returncode == 1 and "no session with id" in unknown.stderr


def test_a_short_receipt_or_call_id_is_refused_without_offering_last(cli: StrataCLI) -> None:
    """`last` names sessions only: a too-short receipt or call id (`last` itself included) does not suggest it."""
    for ref in ("c1x", "last"):
        proc = strata(cli, "reconcile", ref, "--applied")
        assert proc.returncode == 2, proc.stderr
        (line,) = error_lines(proc.stderr)
        assert "receipt or call id" in line and "too short" in line, line
        assert "`last`" not in proc.stderr and "strata receipts" in proc.stderr, proc.stderr


def test_last_names_the_most_recently_updated_session(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    nothing = strata(cli, "show", "last")
    assert nothing.returncode == 2 and "no session yet" in nothing.stderr
    twice = write_script(tmp_path / "twice.json", [[text("hello")], [text("again")]])
    older, _ = _run(cli, workspace, twice)
    newer, _ = _run(cli, workspace, twice)
    assert show_in_process(cli, "last")["session"]["id"] == newer
    # the older one is now the most recently updated
    assert strata_set_up(cli, "resume", older, "again").returncode == 0
    assert show_in_process(cli, "last")["session"]["id"] == older


# -- approvals ----------------------------------------------------------------------------------------------------

PARKED = [[text("Two writes."), tool_use("call_alpha_1", "write_file", path="a.txt", content="a\n"),
           tool_use("call_beta_2", "write_file", path="b.txt", content="b\n")],
          [text("done")]]


def _parked(cli: StrataCLI, workspace: Path, tmp_path: Path) -> str:
    """A session parked on PARKED's two writes, made in this process (tests/_in_process_cli.py): what the run
    prints is the process's (tests/cli/test_in_process_setup.py)."""
    script = write_script(tmp_path / "parked.json", PARKED)
    proc = strata_set_up(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park",
                         "go")
    assert proc.returncode == 4, proc.stderr
    sid = json_lines_in_process(cli, "sessions", "--json")[-1]["id"]
    assert f"strata approve {sid} --all" in proc.stdout
    assert "PROMPT" not in proc.stdout  # no "resume with a prompt" while calls wait for a decision
    assert f"once every call is decided: strata resume {sid}" in proc.stdout
    return sid


def test_approve_all_decides_every_waiting_call_at_once(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    sid = _parked(cli, workspace, tmp_path)
    proc = strata(cli, "approve", sid[:20], "--all")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"approved call call_alpha_1 (write_file) of session {sid}",
                                        f"approved call call_beta_2 (write_file) of session {sid}",
                                        f"continue it: strata resume {sid}"]
    again = strata(cli, "approve", sid, "--all")
    assert again.returncode == 2 and "no call waiting" in again.stderr
    resumed = strata_set_up(cli, "resume", sid)  # the approvals carried out
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "a.txt").read_text() == "a\n" and (workspace / "b.txt").read_text() == "b\n"


def test_a_decision_by_call_prefix_updates_the_waiting_list(cli: StrataCLI, made: Made) -> None:
    copied(cli, made.parked_home)
    sid = made.parked_id
    proc = strata(cli, "deny", "last", "call_alp", "--reason", "not that one")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"denied call call_alpha_1 (write_file) of session {sid}"
    assert lines[1] == "still waiting for a decision: call_beta_2"
    assert "--all" in lines[2] and lines[3] == f"once every call is decided: strata resume {sid}"
    neither = strata(cli, "approve", sid, "call_alpha_1", "--all")
    assert neither.returncode == 2 and "or give --all" in neither.stderr
    denied = strata(cli, "deny", sid, "--all")
    assert denied.returncode == 0 and f"continue it: strata resume {sid}" in denied.stdout


# -- Ctrl-C, reconcile by call id, counts -------------------------------------------------------------------------

def test_a_call_prefix_too_short_to_decide_on_says_so_not_that_the_call_is_not_waiting(
        cli: StrataCLI, made: Made) -> None:
    copied(cli, made.parked_home)
    sid = made.parked_id
    proc = strata(cli, "approve", sid, "call_")
    assert proc.returncode == 2, proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "'call_'" in line and "too short" in line and "not waiting" not in line, line
    assert "call_alpha_1, call_beta_2" in proc.stderr
    nothing = strata(cli, "approve", sid, "zzz")
    assert nothing.returncode == 2 and "call zzz of session" in nothing.stderr and "not waiting" in nothing.stderr


def test_ctrl_c_names_the_receipt_when_another_session_awaits_a_decision_on_the_same_call_id(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Two interrupted sessions whose calls share the id `c1` (a scripted model's): `strata reconcile c1` would
    name two receipts, so the second hint names its receipt, and the command it prints works."""
    script = write_script(tmp_path / "slow.json", [[tool_use("c1", "bash", command="echo x >> started; sleep 30")],
                                                   [text("done")]])
    errs = []
    for n in (1, 2):
        proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash",
                         "go")
        wait_for(workspace / "started", proc, lines=n)
        proc.send_signal(signal.SIGINT)
        done = finish(proc)
        assert done.returncode == 130, done.stderr
        errs.append(done.stderr)
    assert "strata reconcile c1 --applied|--not-applied" in errs[0]
    second = [r for r in json_lines_in_process(cli, "receipts", "--json") if r["status"] == "unknown"][-1]
    assert f"strata reconcile {second['id']} --applied|--not-applied" in errs[1], errs[1]
    assert strata(cli, "reconcile", second["id"], "--not-applied").returncode == 0


def _interrupted(cli: StrataCLI, workspace: Path, tmp_path: Path, call_id: str,
                 command: str) -> subprocess.CompletedProcess[str]:
    """`strata run` of one bash call (`command` must touch `started`), Ctrl-C once it started."""
    script = write_script(tmp_path / "slow.json", [[tool_use(call_id, "bash", command=command)], [text("done")]])
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "go")
    wait_for(workspace / "started", proc)
    proc.send_signal(signal.SIGINT)
    return finish(proc)


def test_ctrl_c_exits_130_naming_resume_and_reconcile_with_the_call_id(cli: StrataCLI, workspace: Path,
                                                                       tmp_path: Path) -> None:
    done = _interrupted(cli, workspace, tmp_path, "toolu_slow_01", "echo started >> started; sleep 30")
    assert done.returncode == 130, done.stderr
    sid = json_lines_in_process(cli, "sessions", "--json")[-1]["id"]
    err = done.stderr
    assert "strata: interrupted" in err and "Traceback" not in err
    assert "call toolu_slow_01 (bash) had started" in err and "outcome is unknown" in err
    # bash's interrupt verdict: what is certain about the command, its outcome still unknown
    assert "the command was killed after it had printed nothing; its whole process group is gone" in err
    assert "strata reconcile toolu_slow_01 --applied|--not-applied" in err
    assert f"continue it: strata resume {sid}" in err and "exit code 130" in err

    reconciled = strata(cli, "reconcile", "toolu_slo", "--not-applied")
    assert reconciled.returncode == 0, reconciled.stderr
    assert ": unknown -> not applied" in reconciled.stdout.splitlines()[0]
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert (receipt["status"], receipt["reads"]) == ("failed", "not applied")
    assert " not applied " in strata_read(cli, "receipts", sid).stdout
    # show and sessions count the same unknown outcomes after the reconcile
    listed = next(s for s in json_lines_in_process(cli, "sessions", "--json") if s["id"] == sid)
    shown = show_in_process(cli, sid)["session"]
    assert listed["unknown_receipts"] == shown["unknown_receipts"] == 0
    assert "unknown outcomes 0 (1 reconciled since)" in strata_read(cli, "show", sid).stdout


def test_an_interrupted_command_that_printed_says_how_much_and_stays_unknown(cli: StrataCLI, workspace: Path,
                                                                           tmp_path: Path) -> None:
    done = _interrupted(cli, workspace, tmp_path, "toolu_talk_01", "echo hello; echo started >> started; sleep 30")
    assert done.returncode == 130, done.stderr
    assert "the command was killed after it had printed 6 bytes; its whole process group is gone" in done.stderr
    sid = json_lines_in_process(cli, "sessions", "--json")[-1]["id"]
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "unknown"  # the verdict informs the person; it decides nothing
    assert "what is known: the command was killed after it had printed 6 bytes" in receipt["note"]


# -- fork ---------------------------------------------------------------------------------------------------------

TWO_BATCHES = [[text("First."), tool_use("a1", "bash", command="echo a1 >> log")],
               [text("Second."), tool_use("b1", "bash", command="echo b1 >> log")],
               [text("done")]]


def test_fork_points_list_timeline_positions_and_fork_at_takes_one(cli: StrataCLI, workspace: Path,
                                                                   tmp_path: Path) -> None:
    script = write_script(tmp_path / "two.json", TWO_BATCHES)
    sid, _ = _run(cli, workspace, script, "--allow", "bash")
    points = strata_json(cli, "fork", sid, "--points", "--json")
    assert [p["turn"] for p in points] == [0, 1, 2, 3]
    assert [p["last_call"] for p in points] == [None, "a1 (bash) ok", "b1 (bash) ok", "b1 (bash) ok"]
    plain = strata(cli, "fork", sid[:20], "--points").stdout
    assert "position" in plain and "last call before it" in plain and "a1 (bash) ok" in plain

    after_first = points[1]
    proc = strata(cli, "fork", sid, "--at", str(after_first["position"]))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"at timeline position {after_first['position']} (event {after_first['event_seq']})" in lines[0]
    assert "events, 1 turn; effects before the fork point are not re-run" in lines[0], lines[0]
    assert "b1 (bash)" in lines[2] and "may propose them again and run them again" in lines[2]
    assert lines[3] == "the fork inherits the session rules: allow bash (flag)"

    (by_turn,) = strata_json(cli, "fork", sid, "--at-turn", "1", "--json")
    assert by_turn["fork_seq"] == after_first["event_seq"] and by_turn["inherited_rules"] == ["allow bash (flag)"]

    inside = after_first["position"] + 2  # a row of the second batch, while it is open
    refused = strata(cli, "fork", sid, "--at", str(inside))
    assert refused.returncode == 2, refused.stderr
    assert f"positions {after_first['position']} and {points[2]['position']}" in refused.stderr
    none = strata(cli, "fork", sid)
    assert none.returncode == 2 and "--at POSITION, --at-turn TURN or --at-event SEQ" in none.stderr


# -- listings -----------------------------------------------------------------------------------------------------

DENIED = [[text("Try."), tool_use("c1", "bash", command="echo hi > f"),
           tool_use("c2", "write_file", path="x", content="y")], [text("done")]]


def test_fork_before_a_parked_call_warns_that_it_may_still_run(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    """A call after the fork point with no result yet (parked here; running, in a live parent) can still run in
    the parent, and resuming the fork may propose it again: the warning names it as well."""
    script = write_script(tmp_path / "park.json", [[text("First."), tool_use("p1", "bash", command="echo p1")]])
    sid, proc = _run(cli, workspace, script, "--on-ask", "park")
    assert proc.returncode == 4, proc.stderr
    first = strata_json(cli, "fork", sid, "--points", "--json")[0]
    forked = strata(cli, "fork", sid, "--at", str(first["position"]))
    assert forked.returncode == 0, forked.stderr
    assert ("warning: the parent has 1 call(s) after the fork point (p1 (bash, no result yet)); resuming the fork "
            "may propose them again") in forked.stdout, forked.stdout
    (as_json,) = strata_json(cli, "fork", sid, "--at", str(first["position"]), "--json")
    assert as_json["later_calls"] == ["p1 (bash, no result yet)"]


def test_headless_prints_one_line_per_denied_call_and_says_when_all_were_denied(cli: StrataCLI, workspace: Path,
                                                                                tmp_path: Path) -> None:
    script = write_script(tmp_path / "denied.json", DENIED)
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert proc.returncode == 0, proc.stderr
    denied = [line for line in proc.stdout.splitlines() if "DENIED" in line]
    assert len(denied) == 2, proc.stdout
    assert denied[0].startswith("  <- bash [c1] DENIED by policy:") and "--allow bash" in denied[0]
    assert "every effectful call was denied (2: bash, write_file)" in proc.stdout
    as_json = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    assert result_line(as_json.stdout)["effects_all_denied"] is True  # type: ignore[index]
    allowed = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash",
                     "--json", "go")
    assert result_line(allowed.stdout)["effects_all_denied"] is False  # type: ignore[index]


def test_plain_timeline_shows_the_check_and_the_full_reason(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "denied.json", DENIED)
    sid, _ = _run(cli, workspace, script)
    out = strata(cli, "timeline", sid, "--kind", "call").stdout
    header = next(line for line in out.splitlines() if "seq" in line)
    assert "check" in header
    flat = " ".join(out.split())
    assert "policy" in flat and "approve it with `strata approve`" in flat  # the end of the reason: not cut
    bad = strata(cli, "timeline", sid, "--kind", "calls")
    assert bad.returncode == 2
    assert "'calls' is not one of phase, model_attempt, call, hook, approval, receipt, lifecycle" in bad.stderr


def test_version_and_verbose_after_the_subcommand(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    version = strata(cli, "--version")
    assert version.returncode == 0 and version.stdout.startswith("strata ")
    proc = strata(cli, "run", "--model", f"script:{_hello(tmp_path)}", "--workspace", str(workspace), "--verbose",
                  "go")
    assert proc.returncode == 0, proc.stderr
    assert "event committed" in proc.stderr and "session_started" in proc.stderr
    assert "aiosqlite" not in proc.stderr and "Using selector" not in proc.stderr


def test_run_without_a_model_uses_chats_default(cli: StrataCLI, workspace: Path) -> None:
    from agent.cli.chat_cmd import DEFAULT_CHAT_MODEL
    from agent.default_model import DEFAULT_MODEL_SPEC

    assert DEFAULT_MODEL_SPEC == DEFAULT_CHAT_MODEL
    proc = strata(cli, "run", "--workspace", str(workspace), "go", env={"ANTHROPIC_API_KEY": ""})
    assert proc.returncode == 2
    (line,) = error_lines(proc.stderr)
    assert "ANTHROPIC_API_KEY" in line and "script:PATH" in line  # the default is the API model, as in chat
    assert "no model chosen" not in proc.stderr
