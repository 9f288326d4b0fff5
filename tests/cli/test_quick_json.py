"""`strata timeline ID --json` and `strata receipts [ID] [--json]` the quick way (agent/cli/quick_timeline.py,
quick_receipts.py): byte for byte what the full way prints (`--verbose` always takes it), masking included, on
sessions made by real `strata` runs: denied calls, a parked one, effectful calls with receipts (one reconciled by a
person, with a note), a delegated child (its bash receipt records a process group), a fork, and a workspace and a
title that hold a configured secret; in a real process that imports no models, no event loop and no logging. The
full way it is compared with runs in the test's process (tests/_in_process_cli.py): the same command group,
environment and working directory, ~0.35 s of CPU less per comparison. What
the quick way cannot answer exactly (a project file naming secrets, a row the store would not read, a home without a
masking key) goes the full way."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests._in_process_cli import run_in_process, set_up_in_process
from tests.cli._helpers import QUICK_NEVER, result_line, run_noting_modules, text, tool_use
from tests.conftest import StrataCLI, write_script

SECRET = "quick-json-secret-7731"
PROJECT_SECRET = "quick-json-project-secret-2290"


def _quick(cli: StrataCLI, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`strata ARGS` through the real entry point; whether it went the quick way."""
    done, loaded = run_noting_modules(cli, list(args), tmp_path)
    return done, not loaded & QUICK_NEVER


def _same_both_ways(cli: StrataCLI, tmp_path: Path, *args: str, quick: bool = True) -> str:
    full = run_in_process(cli, "--verbose", *args)  # the reference: the full way, in this process
    done, took_quick = _quick(cli, tmp_path, *args)
    assert took_quick == quick, (args, done.stderr)
    assert (done.returncode, done.stdout, done.stderr) == (full.returncode, full.stdout, full.stderr), args
    return done.stdout


@pytest.fixture(scope="module")
def made_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A Strata home made once for the module by real `strata` runs (`_make_sessions`), and its sessions' ids."""
    base = tmp_path_factory.mktemp("quick-json")
    (base / "home").mkdir()
    maker = StrataCLI(base / "home", base)
    return maker.home, _make_sessions(maker, base)


@pytest.fixture
def home(cli: StrataCLI, made_home: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The module's made home, copied into this test's own home (its database, masking key and user config; no
    process has it open): each test reads, damages or deletes what it likes in its copy, the others never see it.
    The same sessions as five real runs per test would make, at the cost of one set for the module."""
    shutil.copytree(made_home[0], cli.home, dirs_exist_ok=True)
    return dict(made_home[1])


def _make_sessions(cli: StrataCLI, tmp_path: Path) -> dict[str, str]:
    """Sessions of every shape the tests make, in a workspace whose path holds a configured secret; their ids."""
    user_config = cli.home / "xdg-config" / "strata" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(f'snapshot_every = 3\n\n[secrets]\nvalues = ["{SECRET}"]\n', encoding="utf-8")
    ws = tmp_path / f"ws-{SECRET}"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    busy = write_script(tmp_path / "busy.json", [
        [tool_use("t1", "read_file", path="a.txt"), tool_use("t2", "bash", command="rm -rf ."),
         tool_use("t3", "launch_rockets"), tool_use("t4", "write_file", path="b.txt", content="b")],
        [tool_use("t5", "write_file", path="c.txt", content="c")],
        [text("done")],
    ])
    run = set_up_in_process(cli, "run", "--model", f"script:{busy}", "--workspace", str(ws), "--deny", "bash(rm*)",
                            "--allow", "write_file", "--json", f"write, then tell {SECRET}")
    assert run.returncode == 0, run.stderr
    ids = {"busy": str((result_line(run.stdout) or {})["session_id"])}
    parked = write_script(tmp_path / "parked.json", [[tool_use("w1", "write_file", path="d.txt", content="d")],
                                                     [text("ok")]])
    run = set_up_in_process(cli, "run", "--model", f"script:{parked}", "--workspace", str(ws), "--on-ask", "park",
                            "--json", "write d")
    assert run.returncode == 4, run.stderr
    ids["parked"] = str((result_line(run.stdout) or {})["session_id"])
    example = Path(__file__).resolve().parents[2] / "examples" / "delegate.json"
    run = set_up_in_process(cli, "run", "--model", f"script:{example}", "--workspace", str(ws), "--allow", "bash",
                            "--allow", "delegate", "--json", "delegate it")
    assert run.returncode == 0, run.stderr
    ids["parent"] = str((result_line(run.stdout) or {})["session_id"])
    fork = set_up_in_process(cli, "fork", ids["busy"], "--at-turn", "2", "--json")
    assert fork.returncode == 0, fork.stderr
    with sqlite3.connect(cli.home / "strata.db") as db:
        ids["child"] = db.execute("SELECT id FROM sessions WHERE parent_id = ? AND fork_seq IS NULL",
                                  (ids["parent"],)).fetchone()[0]
        ids["fork"] = db.execute("SELECT id FROM sessions WHERE fork_seq IS NOT NULL").fetchone()[0]
        # an effect whose outcome nobody knows (as a killed run leaves it), then decided by a person with a note
        receipt = db.execute("SELECT id FROM receipts WHERE call_id = 't5'").fetchone()[0]
        db.execute("UPDATE receipts SET status = 'unknown' WHERE id = ?", (receipt,))
    decided = set_up_in_process(cli, "reconcile", receipt, "--applied", "--note", f"checked c.txt in {SECRET}")
    assert decided.returncode == 0, decided.stderr
    return ids


TIMELINE_FILTERS = ([], ["--kind", "call"], ["--decision", "denied"], ["--decision", "parked"],
                    ["--tool", "write_file", "--turn", "1"], ["--since", "4"], ["--kind", "lifecycle"],
                    ["--since", "2020-01-01T00:00:00"], ["--since", "2999-01-01T00:00:00+05:00"])


@pytest.mark.parametrize("name", ["busy", "parked", "parent", "child", "fork"])
def test_timeline_json_the_quick_way_is_the_full_way_for_every_session_and_filter(
        cli: StrataCLI, home: dict[str, str], tmp_path: Path, name: str) -> None:
    """One session per test (each runs 18 pairs of real processes; all five in one test passed the suite's 120 s
    limit on a loaded machine)."""
    sid = home[name]
    shown: dict[tuple[str, ...], str] = {}
    for filters in TIMELINE_FILTERS:
        out = _same_both_ways(cli, tmp_path, "timeline", sid, "--json", *filters)
        assert SECRET not in out, (name, filters)
        shown[tuple(filters)] = out
    rows = [json.loads(line) for line in shown[()].splitlines()]
    assert rows and all(row["session_id"] == sid for row in rows), name
    if name == "busy":
        started = [json.loads(line) for line in shown[("--kind", "lifecycle")].splitlines()]
        assert any("[MASKED:" in str(row["data"].get("workspace")) for row in started)  # the path holds the secret


def test_timeline_json_of_a_prefix_and_of_last_the_quick_way_is_the_full_way(
        cli: StrataCLI, home: dict[str, str], tmp_path: Path) -> None:
    assert set(home) == {"busy", "parked", "parent", "child", "fork"}  # every session is one case above
    for ref in (home["busy"][:-6], "last"):
        _same_both_ways(cli, tmp_path, "timeline", ref, "--json")


def test_receipts_the_quick_way_are_the_full_ways_for_every_session_and_status(
        cli: StrataCLI, home: dict[str, str], tmp_path: Path) -> None:
    listed = [json.loads(line) for line in _same_both_ways(cli, tmp_path, "receipts", "--json").splitlines()]
    assert {r["tool"] for r in listed} >= {"write_file", "delegate", "bash"}
    assert any(r["process"] is not None for r in listed)  # the child's bash recorded its process group
    assert any(r["reads"] == "applied" and r["note"] for r in listed)
    assert SECRET not in json.dumps(listed) and "MASKED" in json.dumps(listed)
    _same_both_ways(cli, tmp_path, "receipts")
    for status in ("done", "dispatched", "unknown", "failed"):
        for as_json in ([], ["--json"]):
            _same_both_ways(cli, tmp_path, "receipts", "--status", status, *as_json)
    for sid in home.values():
        for as_json in ([], ["--json"]):
            _same_both_ways(cli, tmp_path, "receipts", sid, *as_json)
    _same_both_ways(cli, tmp_path, "receipts", home["busy"][:-6], "--json")
    _same_both_ways(cli, tmp_path, "receipts", "last")


def test_a_whole_number_duration_shows_as_the_full_way_shows_it(
        cli: StrataCLI, home: dict[str, str], tmp_path: Path) -> None:
    """The row's model holds `duration_ms` as a float: a stored 5 prints as 5.0 both ways."""
    with sqlite3.connect(cli.home / "strata.db") as db:
        db.execute("DROP TRIGGER IF EXISTS timeline_no_update")
        db.execute("UPDATE timeline SET duration_ms = 5 WHERE duration_ms IS NOT NULL")
    out = _same_both_ways(cli, tmp_path, "timeline", home["busy"], "--json", "--kind", "call")
    assert '"duration_ms": 5.0' in out


def test_a_project_file_naming_secrets_sends_the_json_and_the_receipts_the_full_way(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The project's `[secrets]` count in its sessions' masker: the quick way leaves them to the full way, which
    masks the workspace path that holds one (the table shows no workspace: it stays quick)."""
    ws = tmp_path / f"proj-{PROJECT_SECRET}"
    (ws / ".strata").mkdir(parents=True)
    (ws / ".strata" / "config.toml").write_text(f'[secrets]\nvalues = ["{PROJECT_SECRET}"]\n', encoding="utf-8")
    script = write_script(tmp_path / "w.json", [[tool_use("w1", "write_file", path="x.txt", content="x")],
                                                [text("ok")]])
    run = set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "write_file",
                            "--json", "write x")
    assert run.returncode == 0, run.stderr
    sid = str((result_line(run.stdout) or {})["session_id"])
    out = _same_both_ways(cli, tmp_path, "timeline", sid, "--json", quick=False)
    assert PROJECT_SECRET not in out and "MASKED" in out
    assert PROJECT_SECRET not in _same_both_ways(cli, tmp_path, "receipts", sid, "--json", quick=False)
    _same_both_ways(cli, tmp_path, "timeline", sid)  # the table: quick, as before
    # all receipts: no session, no project layer, in either way (the path is not masked by the project's secret)
    _same_both_ways(cli, tmp_path, "receipts", "--json")


def test_rows_the_store_would_not_read_go_the_full_way(cli: StrataCLI, home: dict[str, str], tmp_path: Path) -> None:
    with sqlite3.connect(cli.home / "strata.db") as db:
        db.execute("DROP TRIGGER IF EXISTS timeline_no_update")
        db.execute("UPDATE timeline SET data = '{not json' WHERE key = (SELECT max(key) FROM timeline)")
        last = db.execute("SELECT key >> 40 FROM timeline WHERE key = (SELECT max(key) FROM timeline)").fetchone()[0]
        damaged = db.execute("SELECT id FROM sessions WHERE num = ?", (last,)).fetchone()[0]
    done = _same_both_ways(cli, tmp_path, "timeline", damaged, "--json", quick=False)
    assert done == ""
    for column, value in (("status", "weird"), ("resource_keys", '"not a list"'), ("process", '{"pid": "1"}'),
                          ("created_at", "yesterday")):
        with sqlite3.connect(cli.home / "strata.db") as db:
            before = db.execute(f"SELECT {column} FROM receipts WHERE call_id = 't4'").fetchone()[0]
            db.execute(f"UPDATE receipts SET {column} = ? WHERE call_id = 't4'", (value,))
        _same_both_ways(cli, tmp_path, "receipts", "--json", quick=False)
        _same_both_ways(cli, tmp_path, "receipts", home["parent"], quick=True)  # not among the rows it reads
        with sqlite3.connect(cli.home / "strata.db") as db:
            db.execute(f"UPDATE receipts SET {column} = ? WHERE call_id = 't4'", (before,))
    _same_both_ways(cli, tmp_path, "receipts", "--json")


def test_a_home_without_a_masking_key_goes_the_full_way(cli: StrataCLI, home: dict[str, str],
                                                        tmp_path: Path) -> None:
    (cli.home / "masking.key").unlink()
    for args in (["timeline", home["busy"], "--json"], ["receipts", "--json"]):
        done, took_quick = _quick(cli, tmp_path, *args)
        assert done.returncode == 0 and not took_quick, (args, done.stderr)
        (cli.home / "masking.key").unlink()  # the full way made one: gone again for the next command
