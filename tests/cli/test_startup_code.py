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

from core import code_cache, pattern_cache
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
    expressions = [key for key in saved if key.startswith("\x00eval\x00")]  # forward references' (typing's compile)
    assert len(expressions) > 50, len(expressions)
    assert any(key.startswith("\x00eval\x00lambda _cls, ") for key in expressions)  # a named tuple's __new__
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


def test_strata_used_as_a_library_leaves_dataclasses_typing_and_collections_alone() -> None:
    probe = ("import collections, dataclasses, typing, agent.session, agent.loop\n"
             "print('exec' in vars(dataclasses), 'compile' in vars(typing), 'eval' in vars(collections))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False False False"


def _pattern_file(prefix: Path) -> Path:
    found = sorted(prefix.rglob("compiled_patterns.*.marshal"))
    assert len(found) == 1, found
    return found[0]


def test_a_command_saves_the_patterns_its_modules_compiled_and_the_next_start_takes_them(
        cli: StrataCLI, tmp_path: Path) -> None:
    """core/pattern_cache.py: the regular expressions compiled on the way in (the masking detectors' among them)
    are kept beside the bytecode; the next start finds every one and writes nothing."""
    from core.masking._detectors import MASK_TOKEN

    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    path = _pattern_file(prefix)
    saved = pattern_cache.read(path)
    assert len(saved) > 50
    assert (MASK_TOKEN.pattern, 0) in saved  # as `re.compile(text)` asked for it: no flags
    stamp = path.stat().st_mtime_ns, path.read_bytes()
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="")
    assert (path.stat().st_mtime_ns, path.read_bytes()) == stamp


def test_what_a_command_reads_never_reaches_the_pattern_file(cli: StrataCLI, tmp_path: Path) -> None:
    """Only the patterns compiled before the command's work starts are kept: a configured secret, the prompt and the
    model's answer are not in the file, whatever the masker or the tools compile from them."""
    secret = "tok-PATTERN-FILE-never-9f8e7d"
    user = cli.home / "xdg-config" / "strata" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(f'[secrets]\nvalues = ["{secret}"]\n', encoding="utf-8")
    script = write_script(tmp_path / "turns.json", [[{"type": "tool_use", "name": "grep",
                                                      "input": {"pattern": f"{secret}|x+", "path": "."}}]])
    prefix = tmp_path / "pycache"
    env = {"PYTHONPYCACHEPREFIX": str(prefix), "PYTHONDONTWRITEBYTECODE": ""}
    done = cli.run("run", "--json", "--allow", "grep", "--model", f"script:{script}", f"find {secret}", env=env)
    assert done.returncode == 0, done.stderr
    assert secret.encode() not in _pattern_file(prefix).read_bytes()
    assert not [key for key in pattern_cache.read(_pattern_file(prefix)) if "PATTERN-FILE" in str(key[0])]


def test_no_pattern_file_is_written_where_python_writes_no_bytecode(cli: StrataCLI, tmp_path: Path) -> None:
    prefix = tmp_path / "pycache"
    _run(cli, tmp_path, prefix, PYTHONDONTWRITEBYTECODE="1")
    assert not list(prefix.rglob("compiled_patterns.*"))


def test_strata_used_as_a_library_leaves_re_alone() -> None:
    probe = "import re._compiler, agent.session, agent.loop\nprint(re._compiler.compile.__module__)\n"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "re._compiler"
