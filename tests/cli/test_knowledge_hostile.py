"""`strata knowledge` and the knowledge tools against hostile input, with real processes: an id that is not UTF-8
on the command line, an index file damaged while a session reads it, and a project's dataset directory that is a
symlink leading out of the workspace. Each is a miss, a clean error or a reported problem, never a traceback and
never a document read from outside the workspace."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from contextlib import closing
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


def test_a_fifo_in_a_dataset_is_reported_without_being_opened(cli: StrataCLI, tmp_path: Path) -> None:
    """A FIFO named like a document is left out as not a regular file, and never opened: a process waiting to
    write to it stays waiting (opening its read end, even without blocking, would have let that writer go on)."""
    root = tmp_path / "ops"
    root.mkdir()
    (root / "restart.md").write_text("# Restart\nrestart the frobnicator\n", encoding="utf-8")
    os.mkfifo(root / "pipe.md")
    opened_at: list[float] = []

    def writer() -> None:  # blocks in open() until some process opens the read end
        fd = os.open(root / "pipe.md", os.O_WRONLY)
        opened_at.append(time.monotonic())
        os.close(fd)

    waiting = threading.Thread(target=writer, daemon=True)
    waiting.start()
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[knowledge.datasets.ops]\npath = "{root}"\nmodes = ["interactive"]\n', encoding="utf-8")
    proc = cli.run("knowledge", "list")
    assert_clean_stderr(proc)
    assert proc.returncode == 0, proc.stderr
    assert "pipe.md: unreadable: not a regular file" in proc.stdout, proc.stdout
    released = time.monotonic()
    reader = os.open(root / "pipe.md", os.O_RDONLY | os.O_NONBLOCK)  # now let the writer go
    try:
        waiting.join(timeout=10)
    finally:
        os.close(reader)
    assert opened_at and opened_at[0] >= released, "strata opened the FIFO"


def test_a_document_whose_path_is_too_long_for_an_id_is_reported_not_a_crash(cli: StrataCLI,
                                                                            tmp_path: Path) -> None:
    """A path in the dataset longer than an id may be (512 characters), without a front-matter id, is left out
    and reported (it was an internal error of every command reading the dataset); the others are indexed."""
    root = tmp_path / "ops"
    long_dir = root / ("a" * 200) / ("b" * 200) / ("c" * 200)
    long_dir.mkdir(parents=True)
    (long_dir / "far.md").write_text("# Far\nthe distant procedure\n", encoding="utf-8")
    (root / "near.md").write_text("# Near\nthe nearby procedure\n", encoding="utf-8")
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[knowledge.datasets.ops]\npath = "{root}"\nmodes = ["interactive"]\n', encoding="utf-8")
    listed = cli.run("knowledge", "list")
    assert_clean_stderr(listed)
    assert listed.returncode == 0, listed.stderr
    assert "ops: 1 document(s)" in listed.stdout, listed.stdout
    assert "far.md: bad name: the path in the dataset is 609 characters" in listed.stdout, listed.stdout


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


def _project_with_runbooks(cli: StrataCLI, workspace: Path, config: str) -> None:
    strata_dir = workspace / ".strata"
    (strata_dir / "knowledge").mkdir(parents=True)
    (strata_dir / "config.toml").write_text(config, encoding="utf-8")
    trusted = cli.run("trust", str(workspace))
    assert trusted.returncode == 0, trusted.stderr


@pytest.mark.parametrize("layout", ["default_dir", "relative_path", "knowledge_dir_itself"])
def test_a_project_dataset_directory_symlinked_out_of_the_workspace_is_reported_and_never_read(
        cli: StrataCLI, tmp_path: Path, workspace: Path, layout: str) -> None:
    """A trusted project's dataset is its own files: a checkout that turns its dataset directory (or a directory
    above it) into a symlink to elsewhere on the machine does not make the agent read, and cite, what is there."""
    outside = tmp_path / "outside"
    (outside / "runbooks" / "private").mkdir(parents=True)
    (outside / "runbooks" / "private" / "secret.md").write_text("the vault zebracorn opens with 4471\n",
                                                                encoding="utf-8")
    modes = 'modes = ["interactive", "headless"]\n'
    if layout == "relative_path":
        _project_with_runbooks(cli, workspace, f'[knowledge.datasets.runbooks]\npath = "docs/runbooks"\n{modes}')
        (workspace / "docs").mkdir()
        (workspace / "docs" / "runbooks").symlink_to(outside / "runbooks")
        root = workspace / "docs" / "runbooks"
    else:
        _project_with_runbooks(cli, workspace, f"[knowledge.datasets.runbooks]\n{modes}")
        knowledge = workspace / ".strata" / "knowledge"
        if layout == "default_dir":  # made after the trust, as a later pull would
            (knowledge / "runbooks").symlink_to(outside / "runbooks")
        else:
            knowledge.rmdir()
            knowledge.symlink_to(outside)
        root = knowledge / "runbooks"
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg-data")}
    found = cli.run("knowledge", "search", "zebracorn", "--workspace", str(workspace), "--json", env=env)
    assert_clean_stderr(found)
    assert found.returncode == 1, found.stdout
    assert json.loads(found.stdout)["kind"] == "not_found" and "4471" not in found.stdout
    listed = cli.run("knowledge", "list", "--workspace", str(workspace), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    problems = [row for row in map(json.loads, listed.stdout.splitlines()) if row["type"] == "problem"]
    assert [(p["dataset"], p["kind"], p["source_path"]) for p in problems] == [
        ("runbooks", "not_followed", str(root))], problems
    assert "out of the workspace" in problems[0]["detail"], problems
    script = write_script(tmp_path / "s.json", [[tool_use("k1", "knowledge_search", query="zebracorn")],
                                                [text("done")]])
    proc = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go", env=env)
    assert_clean_stderr(proc)
    assert proc.returncode == 0, proc.stderr
    result = call_results(events_of(proc.stdout))["k1"]
    assert "4471" not in result["content"] and '"kind":"not_found"' in result["content"], result


@pytest.mark.parametrize("layout", ["user_data_dir", "user_file_path"])
def test_a_users_own_dataset_symlinked_elsewhere_is_read_even_when_the_workspace_holds_it(
        cli: StrataCLI, tmp_path: Path, layout: str) -> None:
    """The person's own datasets (the user file's `path`, `$XDG_DATA_HOME/strata/knowledge/NAME`) may lead anywhere
    they chose, also when the workspace holds them: a workspace of $HOME holds `~/.local/share/strata/knowledge`.
    Only a root the project supplies must stay inside the workspace."""
    workspace = tmp_path / "user-home"
    outside = tmp_path / "elsewhere" / "notes"
    outside.mkdir(parents=True)
    (outside / "rotate.md").write_text("how to rotate the zebracorn key\n", encoding="utf-8")
    modes = 'modes = ["interactive", "headless"]\n'
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    data_home = workspace / ".local" / "share"
    if layout == "user_data_dir":
        (data_home / "strata" / "knowledge").mkdir(parents=True)
        (data_home / "strata" / "knowledge" / "notes").symlink_to(outside)
        config.write_text(f"[knowledge.datasets.notes]\n{modes}", encoding="utf-8")
    else:
        workspace.mkdir()
        (workspace / "notes").symlink_to(outside)
        config.write_text(f'[knowledge.datasets.notes]\npath = "{workspace / "notes"}"\n{modes}', encoding="utf-8")
    env = {"XDG_DATA_HOME": str(data_home)}
    found = cli.run("knowledge", "search", "zebracorn", "--workspace", str(workspace), "--json", env=env)
    assert_clean_stderr(found)
    assert found.returncode == 0, found.stdout
    assert json.loads(found.stdout)["result"] == "hits", found.stdout
    listed = cli.run("knowledge", "list", "--workspace", str(workspace), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [row for row in map(json.loads, listed.stdout.splitlines()) if row["type"] == "problem"] == []


@pytest.mark.parametrize("damage", ["UPDATE docs SET meta = '{'",
                                    "DELETE FROM docs"], ids=["document_rows_garbled", "document_rows_gone"])
def test_an_index_whose_document_rows_disagree_with_its_text_index_is_a_clean_error_naming_it(
        cli: StrataCLI, corpus: Path, damage: str) -> None:
    """The index's own header is intact (so it counts as built), but its document rows were garbled or lost while
    its full-text index still holds them: search and get say the index cannot be read and how to rebuild it (they
    were internal errors: a TypeError unpacking a missing row, a JSON error; and get of a lost row said not_found,
    also for an id that was never there, while search said damaged), and a rebuild mends it."""
    declare(cli, corpus)
    built = cli.run("knowledge", "rebuild")
    assert built.returncode == 0, built.stderr
    (index,) = (cli.home / INDEX_DIR).glob("*.db")
    with closing(sqlite3.connect(index)) as db, db:
        (first,) = db.execute("SELECT doc_id FROM docs ORDER BY rowid LIMIT 1").fetchone()
        db.execute(damage)
    # Rows lost: even a look-up of an id that never was cannot say not_found (it cannot know); rows garbled but all
    # there: such a look-up is an honest miss.
    commands = [("search", "nonlocal"), ("get", first)] + ([("get", "no-such-document")] if "DELETE" in damage else [])
    for args in commands:
        proc = cli.run("knowledge", *args)
        assert_clean_stderr(proc)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert proc.stderr.splitlines()[-2:] == [
            f"strata: error: cannot read the knowledge index {index}: its document rows are damaged",
            "hint: rebuild it: strata knowledge rebuild"], proc.stderr
    assert cli.run("knowledge", "rebuild").returncode == 0
    again = cli.run("knowledge", "search", "nonlocal", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["result"] == "hits", again.stderr


def test_an_index_file_that_is_not_a_database_is_reported_when_it_is_built_again(cli: StrataCLI,
                                                                               corpus: Path) -> None:
    """A file in the index's place whose header is not SQLite's (a stray write, a failing disk, another program's
    file) was taken as 'not built yet' and replaced without a word. The index is derived data and is built again,
    but the search says so, naming the file and what was wrong with it."""
    declare(cli, corpus)
    assert cli.run("knowledge", "rebuild").returncode == 0
    (index,) = (cli.home / INDEX_DIR).glob("*.db")
    index.write_bytes(b"not an index, but someone's notes\n" * 200)
    proc = cli.run("knowledge", "search", "nonlocal", "--json")
    assert_clean_stderr(proc)
    assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == "hits", proc.stderr
    (notice,) = [line for line in proc.stderr.splitlines() if "knowledge index" in line]
    assert notice == (f"strata: notice: the knowledge index {index} could not be read as the index of this corpus "
                      "(file is not a database); it was built again from the corpus"), notice
    again = cli.run("knowledge", "search", "nonlocal", "--json")  # rebuilt whole: nothing more to say
    assert again.returncode == 0 and "knowledge index" not in again.stderr, again.stderr
