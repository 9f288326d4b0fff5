"""`strata db copy` (issue 17, acceptance 4): a SQLite home with 100 sessions copied to PostgreSQL and back; every
session's `strata show --json` and timeline are the same in all three stores, the chains verify, and a second run
copies nothing."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from memory import SqliteEventStore
from tests._in_process_cli import json_lines_in_process, run_in_process
from tests._postgres import Cluster
from tests.conftest import StrataCLI
from tests.memory.test_copy import _fill

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

SESSIONS = 100


async def _home_with_sessions(db: Path) -> None:
    store = await SqliteEventStore.open(db)
    try:
        for k in range(SESSIONS):
            await _fill(store, f"s{k:03d}", k)
    finally:
        await store.close()


def _view(cli: StrataCLI, session_id: str) -> tuple[object, object]:
    show = json_lines_in_process(cli, "show", session_id, "--json")
    timeline = json_lines_in_process(cli, "timeline", session_id, "--json")
    return show, timeline


def test_a_home_copied_to_postgresql_and_back_reads_the_same_everywhere(postgres_cluster: Cluster,
                                                                         tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    anyio.run(_home_with_sessions, home / "strata.db")
    source = StrataCLI(home, tmp_path)
    url = postgres_cluster.new_database()

    copied = source.run("db", "copy", "--to", url)
    assert copied.returncode == 0, copied.stderr
    assert copied.stdout.splitlines()[-1] == f"{SESSIONS} session(s) copied, 0 already there"
    on_pg = StrataCLI(home, tmp_path, store_url=url)

    back_home = tmp_path / "home2"
    back = on_pg.run("db", "copy", "--to", str(back_home / "strata.db"), "--json")
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout.splitlines()[-1]) == {"type": "copied", "copied": SESSIONS, "already": 0}
    assert (back_home / "chain.key").read_bytes() == (home / "chain.key").read_bytes()
    assert (back_home / "chain.key").stat().st_mode & 0o777 == 0o600
    copied_back = StrataCLI(back_home, tmp_path)

    listed = [json_lines_in_process(cli, "sessions", "--json") for cli in (source, on_pg, copied_back)]
    assert [len(x) for x in listed] == [SESSIONS] * 3
    assert listed[0] == listed[1] == listed[2]
    for sid in ("s000", "s042", "s099"):
        views = [_view(cli, sid) for cli in (source, on_pg, copied_back)]
        assert views[0] == views[1] == views[2]
        for cli in (on_pg, copied_back):
            verified = run_in_process(cli, "timeline", sid, "--verify")
            assert verified.returncode == 0, verified.stdout + verified.stderr

    again = source.run("db", "copy", "--to", url)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"0 session(s) copied, {SESSIONS} already there"


def test_copying_into_the_store_in_use_is_a_usage_error(cli: StrataCLI) -> None:
    assert json_lines_in_process(cli, "sessions", "--json") == []
    proc = cli.run("db", "copy", "--to", str(cli.home / "strata.db"))
    assert proc.returncode == 2
    assert "is the store this home uses already" in proc.stderr
