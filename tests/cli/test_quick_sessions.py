"""`strata sessions` the quick way (agent/cli/quick_sessions.py): the same listing as the full way (which restores
each session's state for its counters), byte for byte, in a real process that imports no models, no event loop and
no logging: sessions with denied and parked calls, unknown receipts, snapshots, a delegated child, a fork, a
masked secret in a title, and a damaged event."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.cli._helpers import QUICK_NEVER, result_line, run_noting_modules, text, tool_use
from tests.conftest import StrataCLI, write_script

SECRET = "quick-listing-secret-4417"


def _sessions(cli: StrataCLI, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`strata sessions ARGS` through the real entry point; whether it went the quick way."""
    done, loaded = run_noting_modules(cli, ["sessions", *args], tmp_path)
    return done, not loaded & QUICK_NEVER


def _same_both_ways(cli: StrataCLI, tmp_path: Path) -> list[dict[str, object]]:
    for args in ([], ["--json"]):
        quick, took_quick = _sessions(cli, tmp_path, *args)
        assert quick.returncode == 0 and took_quick, (args, quick.stderr)
        full = cli.run("--verbose", "sessions", *args)
        assert full.returncode == 0, full.stderr
        assert quick.stdout == full.stdout, (args, quick.stdout, full.stdout)
    return [json.loads(line) for line in quick.stdout.splitlines()]


def test_the_quick_listing_is_the_full_listing(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    user_config = cli.home / "xdg-config" / "strata" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(f'snapshot_every = 3\n\n[secrets]\nvalues = ["{SECRET}"]\n', encoding="utf-8")
    (workspace / "a.txt").write_text("alpha\n")
    busy = write_script(tmp_path / "busy.json", [
        [tool_use("t1", "read_file", path="a.txt"), tool_use("t2", "bash", command="rm -rf ."),
         tool_use("t3", "launch_rockets")],
        [tool_use("t4", "read_file", path="a.txt")],
        [tool_use("t5", "read_file", path="a.txt")],
        [text("done")],
    ])
    run = cli.run("run", "--model", f"script:{busy}", "--workspace", str(workspace), "--deny", "bash(rm*)", "--json",
                  f"look at a.txt, then tell {SECRET} about it")
    assert run.returncode == 0, run.stderr
    busy_id = str((result_line(run.stdout) or {})["session_id"])
    parked = write_script(tmp_path / "parked.json", [[tool_use("w1", "write_file", path="b.txt", content="b")],
                                                     [text("ok")]])
    assert cli.run("run", "--model", f"script:{parked}", "--workspace", str(workspace), "--on-ask", "park",
                   "write b").returncode == 4
    example = Path(__file__).resolve().parents[2] / "examples" / "delegate.json"
    delegated = cli.run("run", "--model", f"script:{example}", "--workspace", str(workspace), "--allow", "bash",
                        "--allow", "delegate", "delegate it")
    assert delegated.returncode == 0, delegated.stderr
    fork = cli.run("fork", busy_id, "--at-turn", "2", "--json")
    assert fork.returncode == 0, fork.stderr

    with sqlite3.connect(cli.home / "strata.db") as db:
        assert db.execute("SELECT count(*) FROM snapshots").fetchone()[0] > 0  # counters start from a snapshot
    listed = _same_both_ways(cli, tmp_path)
    assert len(listed) == 5 and [v["depth"] for v in listed].count(1) == 1
    busy_view = next(v for v in listed if v["id"] == busy_id)
    assert (busy_view["turns"], busy_view["tool_calls"], busy_view["denials"]) == (4, 5, 2)
    assert SECRET not in json.dumps(listed) and "MASKED" in str(busy_view["title"])
    assert any(v["status"] == "awaiting_approval" for v in listed)


def test_a_damaged_event_shows_unknown_counters_both_ways(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[tool_use("t1", "read_file", path="nothing.txt")], [text("ok")]])
    for _ in range(2):
        assert cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "x").returncode == 0
    with sqlite3.connect(cli.home / "strata.db") as db:  # no strata runs now: edited in place
        db.execute("DROP TRIGGER events_no_update")
        db.execute("UPDATE events SET payload = '{not json' WHERE pos = (SELECT max(pos) FROM events)")
        db.execute("DELETE FROM snapshots")  # restore then reads every event (a snapshot would cover the damage)
    listed = _same_both_ways(cli, tmp_path)
    assert [v["turns"] for v in listed] == [2, None]


def test_no_sessions_yet_and_a_home_without_a_database_both_ways(cli: StrataCLI, tmp_path: Path) -> None:
    done, took_quick = _sessions(cli, tmp_path)
    assert done.returncode == 0 and "no sessions yet" in done.stdout, done.stderr
    assert not took_quick  # no database: the full way (it says so as before)
