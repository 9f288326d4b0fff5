"""`strata knowledge` and the knowledge tools against hostile input, with real processes: an id that is not UTF-8
on the command line, an index file damaged while a session reads it, and a project's dataset directory that is a
symlink leading out of the workspace. Each is a miss, a clean error or a reported problem, never a traceback and
never a document read from outside the workspace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memory.knowledge import INDEX_DIR
from tests._knowledge_corpus import write_pydoc_topics
from tests.cli._helpers import assert_clean_stderr, call_results, events_of, text, tool_use
from tests.conftest import StrataCLI, write_script


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    write_pydoc_topics(root / "pydoc")
    return root


def declare(cli: StrataCLI, corpus: Path) -> None:
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[knowledge.datasets.pydoc]\npath = "{corpus / "pydoc"}"\n'
                      'modes = ["interactive", "headless"]\n', encoding="utf-8")


def test_get_of_an_id_that_is_not_utf8_is_a_not_found_miss_not_an_internal_error(cli: StrataCLI,
                                                                                corpus: Path) -> None:
    declare(cli, corpus)
    not_utf8 = b"\xff\xfe.txt".decode("utf-8", "surrogateescape")  # argv bytes as Python holds them
    proc = cli.run("knowledge", "get", not_utf8, "--json")
    assert_clean_stderr(proc)
    assert proc.returncode == 1, proc.stderr
    miss = json.loads(proc.stdout)
    assert (miss["result"], miss["kind"]) == ("miss", "not_found"), miss
    plain = cli.run("knowledge", "get", not_utf8)
    assert_clean_stderr(plain)
    assert plain.returncode == 1 and plain.stderr.startswith("strata: miss: not_found"), plain.stderr


def test_an_index_damaged_during_a_session_is_a_clean_tool_error_and_the_next_search_rebuilds_it(
        cli: StrataCLI, corpus: Path, tmp_path: Path, workspace: Path) -> None:
    declare(cli, corpus)
    index_dir = cli.home / INDEX_DIR
    damage = tmp_path / "damage.py"  # the index's first pages zeroed, as a failing disk or a stray write would
    damage.write_text(f"import pathlib\nfor f in pathlib.Path({str(index_dir)!r}).glob('*.db'):\n"
                      "    with open(f, 'r+b') as fh:\n        fh.write(bytes(3 * 4096))\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", [
        [tool_use("k1", "knowledge_search", query="nonlocal")],
        [tool_use("b1", "bash", command=f"{sys.executable} {damage}")],
        [tool_use("k2", "knowledge_search", query="nonlocal")],
        [text("done")],
    ])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                   "go")
    assert_clean_stderr(proc)
    assert "tool handler crashed" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    results = call_results(events_of(proc.stdout))
    assert results["k1"]["status"] == "ok" and '"result":"hits"' in results["k1"]["content"], results["k1"]
    damaged = results["k2"]
    assert damaged["status"] == "error", damaged
    assert "cannot read the knowledge index" in damaged["content"], damaged
    assert "strata knowledge rebuild" in damaged["content"], damaged
    again = cli.run("knowledge", "search", "nonlocal", "--json")  # the damaged file is found invalid and rebuilt
    assert_clean_stderr(again)
    assert again.returncode == 0 and json.loads(again.stdout)["result"] == "hits", again.stderr
