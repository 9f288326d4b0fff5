"""A command exits as `sys.exit` does (its status, the `atexit` functions, its output flushed) without the
interpreter's teardown (agent/cli/leave.py); a thread Python would wait for is waited for. Real `strata`
processes through the console entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli._helpers import scripted_session
from tests.conftest import StrataCLI


def _run_probe(cli: StrataCLI, tmp_path: Path, args: list[str], before: str = "") -> subprocess.CompletedProcess[str]:
    """`strata ARGS` in a child whose atexit functions write `atexit-ran` and keep an object whose finalizer writes
    `teardown-ran` in a module global (the teardown would finalize it)."""
    probe = (
        "import atexit, os, sys, types\n"
        f"marks = {str(tmp_path)!r}\n"
        "atexit.register(lambda: open(marks + '/atexit-ran', 'w').close())\n"
        "class Finalized:\n"
        "    def __del__(self, _os=os, _path=marks + '/teardown-ran'):  # what it needs kept through the teardown\n"
        "        _os.close(_os.open(_path, _os.O_CREAT | _os.O_WRONLY, 0o600))\n"
        "def keep():  # in a module made at exit: not among the start-up objects frozen (agent/cli/startup_gc.py)\n"
        "    late = sys.modules['late_module'] = types.ModuleType('late_module')\n"
        "    late.kept = Finalized()\n"
        "atexit.register(keep)\n"
        + before +
        f"sys.argv = ['strata', *{args!r}]\n"
        "from agent.cli.main import main\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env(), capture_output=True, text=True,
                          timeout=60)


def test_a_command_exits_with_its_status_and_output_after_the_atexit_functions_without_the_teardown(
        cli: StrataCLI, tmp_path: Path) -> None:
    sid = scripted_session(cli, tmp_path)
    done = _run_probe(cli, tmp_path, ["resume", sid, "one more question"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith(f"inspect: strata show {sid}")  # all of it, flushed
    assert (tmp_path / "atexit-ran").exists()
    assert not (tmp_path / "teardown-ran").exists()

    (tmp_path / "atexit-ran").unlink()
    refused = _run_probe(cli, tmp_path, ["resume", "no-such-session", "hello"])
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[0] == "strata: error: no session with id 'no-such-session'"
    assert (tmp_path / "atexit-ran").exists() and not (tmp_path / "teardown-ran").exists()


def test_a_thread_python_would_wait_for_is_waited_for(cli: StrataCLI, tmp_path: Path) -> None:
    """A thread that is not a daemon and still runs when the command ends is waited for, as Python's exit waits
    for it; then the command ends without the teardown all the same."""
    before = (
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    open(marks + '/thread-done', 'w').close()\n"
        "threading.Thread(target=late).start()\n"
    )
    done = _run_probe(cli, tmp_path, ["--version"], before)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("strata ")
    assert (tmp_path / "thread-done").exists()
    assert (tmp_path / "atexit-ran").exists() and not (tmp_path / "teardown-ran").exists()


def test_a_command_run_under_a_profiler_exits_the_usual_way_so_the_profile_is_written(
        cli: StrataCLI, tmp_path: Path) -> None:
    """`python -m cProfile -o FILE -m agent ...` writes its report after the command returns: a command that ended the
    process itself would leave no report (nor would a tracer, a debugger or a coverage run get to finish)."""
    report = tmp_path / "strata.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(report), "-m", "agent", "--version"],
                          cwd=cli.cwd, env=cli.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("strata ")
    assert report.stat().st_size > 0
