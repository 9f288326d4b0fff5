"""A command keeps the code compiled for the methods `dataclasses` generates (agent/cli/startup_code.py): the first
start saves it beside the bytecode, the next one compiles nothing anew, a damaged file is replaced, and nothing is
written where Python writes no bytecode. Real `strata` processes, the bytecode redirected into the test's own
directory with PYTHONPYCACHEPREFIX."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from core import code_cache
from tests.conftest import REPO, StrataCLI, write_script


def _code_file(prefix: Path) -> Path:
    found = sorted(prefix.rglob("generated_code.*.marshal"))
    assert len(found) == 1, found
    return found[0]


def _run(cli: StrataCLI, tmp_path: Path, prefix: Path, **extra: str) -> None:
    script = write_script(tmp_path / "turns.json", [])
    env = {"PYTHONPYCACHEPREFIX": str(prefix), **extra}
    done = cli.run("run", "--json", "--model", f"script:{script}", "hello", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_command_saves_the_code_it_compiled_and_the_next_start_compiles_nothing_anew(
        cli: StrataCLI, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    path = _code_file(prefix)
    saved = code_cache.read(path)
    assert len(saved) > 100  # Strata's records and the libraries' dataclasses
    assert any(source.startswith("def __init__(self") for source in saved)  # a record's __init__ (core/record.py)
    assert any("__create_fn__" in source for source in saved)  # a method `dataclasses` generated
    stamp = path.stat().st_mtime_ns, path.read_bytes()

    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    assert (path.stat().st_mtime_ns, path.read_bytes()) == stamp  # every source was found: nothing to save


def test_a_damaged_code_file_is_ignored_and_replaced(cli: StrataCLI, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    path = _code_file(prefix)
    path.write_bytes(b"\xe3not marshal data at all")
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    assert len(code_cache.read(path)) > 100


def test_a_fifo_where_the_code_file_is_kept_neither_blocks_the_start_nor_is_read(
        cli: StrataCLI, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    path = _code_file(prefix)
    path.unlink()
    os.mkfifo(path)  # opened for reading the usual way, a FIFO with no writer blocks the start forever
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    assert stat.S_ISREG(path.stat().st_mode)  # the code compiled anew replaced it, as a damaged file is
    assert len(code_cache.read(path)) > 100


def test_no_code_file_is_written_where_python_writes_no_bytecode(cli: StrataCLI, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="1")
    assert not list(prefix.rglob("generated_code.*"))


def test_strata_used_as_a_library_leaves_dataclasses_alone() -> None:
    probe = "import dataclasses, agent.session, agent.loop\nprint('exec' in vars(dataclasses))\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
