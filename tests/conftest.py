"""Shared fixtures: a fresh Strata home and workspace per test, and a runner for the real `strata` process."""

from __future__ import annotations

import compileall
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests._postgres import Cluster, start_cluster

REPO = Path(__file__).resolve().parent.parent


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """One worker more than the machine has cores (at least two, at most eight) when pytest-xdist is there: much
    of the suite waits on real subprocesses (strata runs, hooks, Chromium, lease expiry), so a core would often sit
    idle under one worker per core (measured on 2 cores, fresh clones, nothing else running: two workers 660 s with
    the load average at 1.5-2, three workers 541 s). Not an `addopts` entry, so pytest without xdist (or with
    `-p no:xdist`) still collects and runs everything; `-n N` on the command line wins."""
    if (config.pluginmanager.hasplugin("xdist") and getattr(config.option, "numprocesses", 0) is None
            and not hasattr(config, "workerinput") and "PYTEST_XDIST_WORKER" not in os.environ):
        config.option.numprocesses = min(8, max(2, (os.cpu_count() or 1) + 1))
        if getattr(config.option, "dist", "no") in ("no", "load"):
            # Whole modules to a worker: several modules share one expensive module fixture (the crash and review
            # suites start dozens of strata processes once), which would otherwise run on both workers, and
            # again each time a worker came back to the module.
            config.option.dist = "loadscope"


PRODUCT_PACKAGES = ("core", "config", "memory", "observability", "tool_executor", "agent")


def pytest_configure(config: pytest.Config) -> None:
    """Tests send SIGINT to strata as Ctrl-C does. A shell without job control starts a background job (`pytest &`,
    or CI started that way) with SIGINT ignored, every process it starts inherits that, and strata, like any
    program, leaves an ignored SIGINT ignored: the Ctrl-C tests would then wait for a run that never stops. So
    this process (and through it each strata it starts) takes SIGINT as usual again."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # pytest keeps the assertion-rewritten code of each test module in __pycache__ only where Python writes
    # bytecode: under PYTHONDONTWRITEBYTECODE (this machine's shell exports it) every pytest process (each xdist
    # worker collects the whole suite) parsed and rewrote all ~370 test modules again, about half of collecting
    # (14.7 s -> 7.2 s of CPU per worker measured). The cache is checked against each file's mtime and size, and
    # written by an atomic rename, so workers writing at once are safe. Only this process: the strata processes the
    # tests start keep the environment as it is (their bytecode is written below, once).
    sys.dont_write_bytecode = False
    if not hasattr(config, "workerinput"):  # once per run, before any worker starts
        _compile_product()


def _compile_product() -> None:
    """The product's bytecode, written once before the tests start the many strata processes they run.
    A shell that exports PYTHONDONTWRITEBYTECODE (this machine's does) leaves no __pycache__ behind,
    so each of those processes compiled every module it imports from source: about 100 ms of CPU of each
    `strata run` on this machine (370 ms -> 265 ms measured). The variable stops writing, not reading: with the
    files in place every process reads them. compileall writes only what is missing or stale, each file by an
    atomic rename."""
    for package in PRODUCT_PACKAGES:
        compileall.compile_dir(REPO / package, quiet=1)
    _save_generated_code()


_GENERATE = """
import importlib, pkgutil, sys
from agent.cli.startup_code import startup_code
startup_code.install()
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if not info.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(info.name)
startup_code.save()
"""


def _save_generated_code() -> None:
    """The same for the methods `dataclasses` generates (agent/cli/startup_code.py): a `strata` process saves the
    ones it compiled only where Python writes bytecode, so under PYTHONDONTWRITEBYTECODE each of them compiled
    them all again (~250 functions, about 18 ms of CPU each start). One process that imports every product module
    saves them before the tests start.

    That process costs ~2.5 s of CPU, and every pytest started paid it: each run of a single test file, and the
    pytest processes some tests start (tests/test_system_programs.py). So it runs only when what it saves could
    have changed since it last ran here: another Python or environment, a product file added, edited or removed, a
    package installed or removed, or a saved file gone (`_generated_code_stamp`). A saved file that lacks a source
    costs only speed, never correctness: the code is keyed by its whole source (core/code_cache.py), and a start
    compiles what the file lacks."""
    stamp, mark = _generated_code_stamp()
    if mark is not None and _read_text(mark) == stamp:
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", _GENERATE, *PRODUCT_PACKAGES], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    stamp, mark = _generated_code_stamp()
    if mark is not None:
        tmp = mark.with_name(f"{mark.name}.{os.getpid()}.tmp")
        tmp.write_text(stamp, encoding="utf-8")
        tmp.replace(mark)  # atomic: a pytest starting meanwhile reads the old stamp or the new one


def _generated_code_stamp() -> tuple[str, Path | None]:
    """What the saved start-up code depends on, as one line, and the file beside it that holds the line as of the
    last generation (None where Python keeps no such file, or a saved file is missing: generate again)."""
    import hashlib
    import site

    from core import code_cache, pattern_cache

    saved = [code_cache.default_path(), pattern_cache.default_path()]
    if any(path is None or not path.is_file() for path in saved):
        return "", None
    digest = hashlib.sha256(f"{sys.version}\0{sys.executable}\0{sys.pycache_prefix}\0".encode())
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            info = path.stat()
            digest.update(f"{path.relative_to(REPO)}\0{info.st_mtime_ns}\0{info.st_size}\0".encode())
    for packages_dir in site.getsitepackages():  # a package installed or removed changes its directory
        with_time = os.stat(packages_dir).st_mtime_ns if os.path.isdir(packages_dir) else 0
        digest.update(f"{packages_dir}\0{with_time}\0".encode())
    first = saved[0]
    assert first is not None
    return digest.hexdigest(), first.with_name(first.name.replace(".marshal", ".tests-stamp"))


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def strata_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


ENVIRON_LOCK = threading.RLock()
"""Held while a command runs in the test's process with its environment in `os.environ` (tests/_in_process_cli.py),
and while a `StrataCLI` copies `os.environ` for a process it starts: a thread of the test starting one meanwhile
waits rather than copy an environment that is being changed."""


class StrataCLI:
    """Runs the real `strata` command (python -m agent) as a subprocess against one Strata home."""

    def __init__(self, home: Path, cwd: Path, *, store_url: str | None = None) -> None:
        self.home = home
        self.cwd = cwd
        self.store_url = store_url
        """A PostgreSQL URL: every `strata` this runs uses that store (STRATA_DB) instead of the home's SQLite."""

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        # COLUMNS/LINES from the test runner (pytest-xdist workers set them) would override a pty's real size.
        with ENVIRON_LOCK:
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith("STRATA_") and k not in ("COLUMNS", "LINES")}
        env["STRATA_HOME"] = str(self.home)
        env["XDG_CONFIG_HOME"] = str(self.home / "xdg-config")  # never the machine's own user config
        env["PYTHONPATH"] = str(REPO)
        # A test that gives up on a hung strata sends SIGABRT first: faulthandler prints every thread's stack.
        env["PYTHONFAULTHANDLER"] = "1"
        if self.store_url is not None:
            env["STRATA_DB"] = self.store_url
        if extra:
            env.update(extra)
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", "agent", *args]

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args), cwd=self.cwd, env=self.env(env), capture_output=True, text=True,
                              timeout=timeout, input=input)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(args), cwd=self.cwd, env=self.env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def spawn_pty(self, *args: str, env: dict[str, str] | None = None) -> Any:
        """`strata ARGS` in a pseudo-terminal (pexpect): an xterm without colours, no cursor-position queries,
        wide enough that nothing wraps."""
        import pexpect

        env = self.env({"TERM": "xterm", "NO_COLOR": "1", "PROMPT_TOOLKIT_NO_CPR": "1", **(env or {})})
        return pexpect.spawn(sys.executable, ["-m", "agent", *args], cwd=str(self.cwd), env=env, encoding="utf-8",
                             timeout=30, dimensions=(60, 250))

    def json_lines(self, *args: str) -> list[dict[str, Any]]:
        proc = self.run(*args)
        assert proc.returncode == 0, proc.stderr
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def show(self, session_id: str) -> dict[str, Any]:
        (view,) = self.json_lines("show", session_id, "--json")
        return view


@pytest.fixture
def cli(strata_home: Path, tmp_path: Path) -> StrataCLI:
    return StrataCLI(strata_home, tmp_path)


def write_script(path: Path, turns: list[list[dict[str, Any]]]) -> Path:
    path.write_text(json.dumps(turns), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for the test session (skips where PostgreSQL is not installed)."""
    yield from start_cluster()
