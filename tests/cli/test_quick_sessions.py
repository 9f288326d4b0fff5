"""`strata sessions` the quick way (agent/cli/quick_sessions.py): the same listing as the full way (which restores
each session's state for its counters), byte for byte, in a real process that imports no models, no event loop and
no logging: sessions with denied and parked calls, unknown receipts, snapshots, a delegated child, a fork, a
masked secret in a title, and a damaged event. The full way it is compared with (`--verbose`) runs in the test's
process (tests/_in_process_cli.py)."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import zlib
from pathlib import Path

import pytest

from config.checked import CHECKED_FILE, digest
from tests._in_process_cli import run_in_process, set_up_in_process
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
        full = run_in_process(cli, "--verbose", "sessions", *args)
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
    run = set_up_in_process(cli, "run", "--model", f"script:{busy}", "--workspace", str(workspace), "--deny",
                            "bash(rm*)", "--json", f"look at a.txt, then tell {SECRET} about it")
    assert run.returncode == 0, run.stderr
    busy_id = str((result_line(run.stdout) or {})["session_id"])
    parked = write_script(tmp_path / "parked.json", [[tool_use("w1", "write_file", path="b.txt", content="b")],
                                                     [text("ok")]])
    assert set_up_in_process(cli, "run", "--model", f"script:{parked}", "--workspace", str(workspace), "--on-ask",
                             "park", "write b").returncode == 4
    example = Path(__file__).resolve().parents[2] / "examples" / "delegate.json"
    delegated = set_up_in_process(cli, "run", "--model", f"script:{example}", "--workspace", str(workspace), "--allow",
                                  "bash", "--allow", "delegate", "delegate it")
    assert delegated.returncode == 0, delegated.stderr
    fork = set_up_in_process(cli, "fork", busy_id, "--at-turn", "2", "--json")
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
        assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                                 "x").returncode == 0
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


def _home_files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.startswith("strata.db")}  # SQLite's own -wal/-shm: any reader's


def test_a_home_without_a_masking_key_goes_the_full_way_and_the_quick_way_creates_none(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "t.json", [[text("ok")]])
    assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                             "hello").returncode == 0
    (cli.home / "masking.key").unlink()
    before = _home_files(cli.home)
    done, took_quick = _sessions(cli, tmp_path)
    assert done.returncode == 0 and "hello" in done.stdout, done.stderr
    assert not took_quick  # the full way made the key the listing is masked with, as before
    assert (cli.home / "masking.key").is_file() and set(_home_files(cli.home)) - set(before) == {"masking.key"}
    quick, took_quick = _sessions(cli, tmp_path)  # with the key back, the quick way again, the same listing
    assert took_quick and quick.stdout == done.stdout


def test_a_secret_the_home_has_not_remembered_goes_the_full_way_which_remembers_it(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "t.json", [[text("ok")]])
    token = "tok-quick-remember-5521"
    assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                             "hello").returncode == 0
    with sqlite3.connect(cli.home / "strata.db") as db:  # a title holding a value that is a secret only now
        db.execute("UPDATE sessions SET title = ?", (f"deploy with {token}",))
    before = _home_files(cli.home)
    env = {"MY_API_TOKEN": token}
    probe = cli.env(env)
    done, loaded = run_noting_modules(StrataCLIWithEnv(cli, probe), ["sessions"], tmp_path)
    assert done.returncode == 0 and token not in done.stdout and "MASKED" in done.stdout, done.stderr
    assert loaded & QUICK_NEVER  # the full way: it appends the value to masking.seen
    assert token in (cli.home / "masking.seen").read_text(encoding="utf-8") != before.get("masking.seen", b"").decode()
    after = _home_files(cli.home)
    again, loaded = run_noting_modules(StrataCLIWithEnv(cli, probe), ["sessions"], tmp_path)
    assert not loaded & QUICK_NEVER and again.stdout == done.stdout  # remembered: the quick way, the same listing
    assert _home_files(cli.home) == after  # and it wrote nothing
    plain, loaded = run_noting_modules(cli, ["sessions"], tmp_path)  # without the variable: masked all the same
    assert not loaded & QUICK_NEVER and plain.stdout == done.stdout


class StrataCLIWithEnv(StrataCLI):
    """The same home, with extra environment variables for every command it runs."""

    def __init__(self, cli: StrataCLI, env: dict[str, str]) -> None:
        super().__init__(cli.home, cli.cwd)
        self._env = env

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**self._env, **(extra or {})}


def test_an_unknown_receipt_the_store_would_not_read_sends_the_listing_the_full_way(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The full way reads each unknown receipt into a Receipt: one edited behind the store's back (a time that is
    not ISO, resource keys that are not JSON, a process group of other fields) fails it, so the quick way must not
    print a listing with it counted."""
    script = write_script(tmp_path / "t.json", [[tool_use("k1", "bash", command="true")], [text("ok")]])
    assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow",
                             "bash", "x").returncode == 0
    with sqlite3.connect(cli.home / "strata.db") as db:
        for (trigger,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'receipts'"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("UPDATE receipts SET status = 'unknown'")  # as a resume settles a call it cannot know
    listing = _same_both_ways(cli, tmp_path)
    assert listing[0]["unknown_receipts"] == 1
    for column, value in (("created_at", "garbage"), ("resource_keys", "{not json"), ("process", '{"pid": 1}')):
        with sqlite3.connect(cli.home / "strata.db") as db:
            before = db.execute(f"SELECT {column} FROM receipts").fetchone()[0]
            db.execute(f"UPDATE receipts SET {column} = ?", (value,))
        quick, took_quick = _sessions(cli, tmp_path)
        full = run_in_process(cli, "--verbose", "sessions")
        assert not took_quick and quick.returncode == full.returncode != 0 and quick.stdout == full.stdout == "", column
        with sqlite3.connect(cli.home / "strata.db") as db:
            db.execute(f"UPDATE receipts SET {column} = ?", (before,))


@pytest.mark.parametrize("user_file", [
    b'[secrets]\nvalues = [1]\n',
    b'secrets = 3\n',
    b'[secrets]\nvalues = "not-a-list-secret"\n',
    b'[secrets]\nenv = "MY_TOKEN"\n',
    b'[mcp.servers.tracker]\ncommand = "x"\nenv = 5\n',
    b'[mcp.servers.tracker]\ncommand = "x"\nenv = { TOKEN = 5 }\n',
])
def test_a_record_that_calls_an_invalid_user_file_valid_still_gets_the_full_ways_one_error(
        cli: StrataCLI, workspace: Path, tmp_path: Path, user_file: bytes) -> None:
    """config-checked.json is advisory: a digest it holds for a file no full load would pass (forged, or left
    from another Strata) sends the listing the full way, which names the file and key (exit 2); the quick way
    read the file's secrets as they were and ended in an internal error."""
    script = write_script(tmp_path / "t.json", [[text("ok")]])
    assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                             "hello").returncode == 0
    user = cli.home / "xdg-config" / "strata" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_bytes(user_file)
    (cli.home / CHECKED_FILE).write_text(json.dumps([f"user:{digest(user_file)}"]), encoding="utf-8")
    for args in ([], ["--json"]):
        done = cli.run("sessions", *args)
        assert done.returncode == 2 and done.stdout == "", (args, done.stdout, done.stderr)
        assert "internal error" not in done.stderr and f"file {user}, key " in done.stderr, done.stderr


@pytest.mark.parametrize("damage", ["nested too deep", "counters as floats", "counters infinite", "counters as bools"])
def test_a_snapshot_head_restore_ignores_is_ignored_by_the_quick_listing_too(
        cli: StrataCLI, workspace: Path, tmp_path: Path, damage: str) -> None:
    """A snapshot row whose head restore refuses (core/snapshot_head.py) costs the listing a fold of the log, the
    quick way as the full way: the same counters, never an internal error (a head nested too deep raised
    RecursionError; `Infinity` counters OverflowError) nor a float or bool counter taken as a count."""
    user_config = cli.home / "xdg-config" / "strata" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("snapshot_every = 1\n", encoding="utf-8")
    script = write_script(tmp_path / "turns.json", [[tool_use("t1", "read_file", path="nothing.txt")],
                                                   [tool_use("t2", "launch_rockets")], [text("ok")]])
    assert cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "x").returncode == 0
    undamaged = _same_both_ways(cli, tmp_path)
    assert [(v["turns"], v["tool_calls"], v["denials"]) for v in undamaged] == [(3, 2, 1)]

    with sqlite3.connect(cli.home / "strata.db") as db:  # no strata runs now: edited in place
        key, stored = db.execute("SELECT key, data FROM snapshots").fetchone()
        head, newline, conversation = zlib.decompress(bytes(stored)[len(b"strata-zlib:"):]).partition(b"\n")
        state = json.loads(head)
        counters = state["counters"]
        if damage == "nested too deep":
            head = b"[" * 100_000 + head
        else:
            for name in ("assistant_turns", "tool_calls", "denials"):
                counters[name] = {"counters as floats": float(counters[name]), "counters infinite": math.inf,
                                  "counters as bools": True}[damage]
            head = json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        db.execute("UPDATE snapshots SET data = ? WHERE key = ?",
                   (b"strata-zlib:" + zlib.compress(head + newline + conversation), key))

    assert _same_both_ways(cli, tmp_path) == undamaged
