"""Text holding NUL characters on PostgreSQL, whose text values cannot hold one (memory/postgres/_nul_text.py).

Before, a call whose output held a NUL (a binary file read, `printf '\\0'`) failed its commit on PostgreSQL, the turn
ended, and every resume failed the same way; a SQLite home with such a session could not be copied there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.postgres._nul_text import MARK, loaded, stored
from tests._in_process_cli import json_lines_in_process, run_in_process
from tests._postgres import Cluster
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow

PROMPT = f"{MARK}0 read a.bin, a title that starts with the mark"
NUL_SCRIPT = [
    [tool_use("r1", "read_file", path="a.bin")],
    [tool_use("b1", "bash", command="printf 'head\\0tail'")],
    [tool_use("b2", "bash", command=f"printf '{MARK}starts with the mark\\0 and a nul {MARK}0'")],
    [tool_use("n\x00x", "no\x00such", n=1)],
    [text("read it: \x00 done")],
]


def _run(cli: StrataCLI, tmp_path: Path) -> str:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "a.bin").write_bytes(b"PK\x00\x05 binary\x00after\n")
    script = write_script(tmp_path / "nul.json", NUL_SCRIPT)
    run = cli.run("run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "--json",
                  PROMPT)
    assert run.returncode == 0, run.stderr
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    assert session["status"] == "completed"
    return str(session["id"])


def _contents(cli: StrataCLI, session_id: str) -> tuple[list[object], list[object]]:
    shown = json_lines_in_process(cli, "show", session_id, "--json")
    timeline = json_lines_in_process(cli, "timeline", session_id, "--json")
    return shown, timeline


def _check(cli: StrataCLI, session_id: str) -> None:
    verify = run_in_process(cli, "timeline", session_id, "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    (shown,) = json_lines_in_process(cli, "show", session_id, "--json")
    assert shown["session"]["title"] == PROMPT
    results = {b["tool_use_id"]: b["content"] for m in shown["messages"] for b in m["content"]
               if b["type"] == "tool_result"}
    assert results["r1"] == "PK\x00\x05 binary\x00after\n" and results["b1"].endswith("head\x00tail")
    assert results["b2"].endswith(f"{MARK}starts with the mark\x00 and a nul {MARK}0")
    assert shown["messages"][-1]["content"] == [{"type": "text", "text": "read it: \x00 done"}]
    rows = json_lines_in_process(cli, "timeline", session_id, "--json", "--kind", "call")
    assert [r["decision"] for r in rows] == ["allowed", "allowed", "allowed", "denied"]
    assert ["\x00" in r["summary"] for r in rows] == [True, True, True, False]


def test_output_holding_nul_is_recorded_on_postgresql_and_reads_back_exactly(postgres_cluster: Cluster,
                                                                             tmp_path: Path) -> None:
    cli = StrataCLI(tmp_path / "home", tmp_path, store_url=postgres_cluster.new_database())
    session_id = _run(cli, tmp_path)
    _check(cli, session_id)
    resumed = cli.run("resume", session_id, "--model", f"script:{tmp_path / 'nul.json'}", "again")
    assert resumed.returncode == 0, resumed.stderr


def test_a_sqlite_home_with_nul_text_copies_to_postgresql_and_back_unchanged(postgres_cluster: Cluster,
                                                                             tmp_path: Path) -> None:
    source = StrataCLI(tmp_path / "home", tmp_path)
    session_id = _run(source, tmp_path)
    url = postgres_cluster.new_database()
    copied = source.run("db", "copy", "--to", url)
    assert copied.returncode == 0, copied.stderr
    on_pg = StrataCLI(tmp_path / "home", tmp_path, store_url=url)
    _check(on_pg, session_id)
    back = on_pg.run("db", "copy", "--to", str(tmp_path / "home2" / "strata.db"))
    assert back.returncode == 0, back.stderr
    copied_back = StrataCLI(tmp_path / "home2", tmp_path)
    assert _contents(source, session_id) == _contents(on_pg, session_id) == _contents(copied_back, session_id)


@pytest.mark.parametrize("value", ["", "plain", "a\x00b", "\x00", MARK, MARK + "0", f"x{MARK}0\x00{MARK}1{MARK}",
                                   f"{MARK}1\x00", "\x00" * 3 + MARK * 3])
def test_the_stored_form_of_text_reads_back_as_the_same_text(value: str) -> None:
    kept = stored(value)
    assert "\x00" not in kept and loaded(kept) == value
    assert kept == value or kept.startswith(MARK)
    assert (kept == value) == ("\x00" not in value and not value.startswith(MARK))
    assert json.dumps(value) == json.dumps(loaded(kept))
