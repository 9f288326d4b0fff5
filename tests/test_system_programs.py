"""The README's test command passes on a fresh machine (issue 19, item 9): a test that needs a system program
skips, with one visible reason, where the program is missing, and fails instead where the environment requires
the program (CI, after installing it). Real pytest processes run real test files."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._system import POSTGRES

REPO = Path(__file__).resolve().parent.parent
BROWSER_TEST = "tests/cli/test_export.py::test_html_opens_in_headless_chromium"


def _pytest(*args: str, cwd: Path, env: dict[str, str], basetemp: Path) -> subprocess.CompletedProcess[str]:
    """A real pytest process. Its temporary directories go under `basetemp` (a directory of this test's), never
    the shared /tmp/pytest-of-USER: the inner run's clean-up of old numbered directories there raced the outer
    run's workers (a directory listed, then removed under it), and the generator it left open was reported at
    exit as an unraisable ResourceWarning, which the suite's filterwarnings=error turns into a failed run."""
    return subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider",
                           f"--basetemp={basetemp}", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATA_") and k != "PYTEST_XDIST_WORKER"}
    env["PATH"] = "/nonexistent"  # no Chromium to be found, whatever this machine has installed
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def test_the_browser_test_skips_with_its_reason_where_chromium_is_missing(tmp_path: Path) -> None:
    """Without Chromium the README's test command reports the browser test as one skip whose reason names
    Chromium and how to install it, and passes."""
    proc = _pytest(BROWSER_TEST, cwd=REPO, env=_env(), basetemp=tmp_path / "inner")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 skipped" in proc.stdout, proc.stdout[-3000:]
    (reason,) = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert "Chromium is not installed" in reason and "apt-get install -y chromium" in reason, reason


def test_the_browser_test_fails_where_chromium_is_required_but_missing(tmp_path: Path) -> None:
    """With STRATA_REQUIRE_BROWSER=1 (as CI sets it) a missing Chromium is a failure that says so, never a
    skip."""
    proc = _pytest(BROWSER_TEST, cwd=REPO, env=_env(STRATA_REQUIRE_BROWSER="1"), basetemp=tmp_path / "inner")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert ("1 error" in proc.stdout or "1 failed" in proc.stdout) and "skipped" not in proc.stdout, proc.stdout[-3000:]
    assert "STRATA_REQUIRE_BROWSER=1 requires it" in proc.stdout, proc.stdout[-3000:]


def test_any_system_program_follows_the_same_pattern(tmp_path: Path) -> None:
    """The helper is the pattern for the next program (PostgreSQL): skip with a reason, or fail where its
    variable is 1; a program that is there is found and the test runs."""
    (tmp_path / "test_needs_it.py").write_text(
        "from tests._system import SystemProgram\n"
        "FROB = SystemProgram('Frobnicator', ('strata-no-such-program',), 'STRATA_REQUIRE_FROB', 'apt install frob')\n"
        "SH = SystemProgram('A shell', ('sh',), 'STRATA_REQUIRE_SH', 'apt install dash')\n"
        "def test_needs_frob():\n"
        "    FROB.require()\n"
        "def test_needs_sh():\n"
        "    assert SH.require().endswith('/sh')\n")
    env = _env()
    env["PATH"] = "/usr/bin:/bin"
    skipped = _pytest("-rs", "test_needs_it.py", cwd=tmp_path, env=env, basetemp=tmp_path / "inner1")
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert "1 passed, 1 skipped" in skipped.stdout, skipped.stdout[-3000:]
    assert "Frobnicator is not installed" in skipped.stdout and "apt install frob" in skipped.stdout
    failed = _pytest("-rs", "test_needs_it.py", cwd=tmp_path, env={**env, "STRATA_REQUIRE_FROB": "1"},
                     basetemp=tmp_path / "inner2")
    assert failed.returncode == 1 and "1 failed, 1 passed" in failed.stdout, failed.stdout[-3000:]


def test_ci_requires_the_browser_it_installs() -> None:
    """.ci/run installs Chromium when it is missing and then sets STRATA_REQUIRE_BROWSER=1, so CI never skips
    the browser test."""
    ci = (REPO / ".ci" / "run").read_text()
    assert "apt-get install -y -qq chromium" in ci
    assert ci.index("apt-get install -y -qq chromium") < ci.index("export STRATA_REQUIRE_BROWSER=1")


def test_a_missing_postgresql_skips_naming_it_and_fails_where_required(monkeypatch: pytest.MonkeyPatch) -> None:
    """The PostgreSQL tests use the same rule: without `initdb` (on PATH or in Debian's folder) they skip, saying
    how to install PostgreSQL; with STRATA_REQUIRE_POSTGRES=1 (CI) that is a failure."""
    missing = dataclasses.replace(POSTGRES, commands=("strata-no-such-initdb",), also_in=())
    monkeypatch.delenv("STRATA_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"PostgreSQL is not installed.*apt-get install -y postgresql"):
        missing.require()
    monkeypatch.setenv("STRATA_REQUIRE_POSTGRES", "1")
    with pytest.raises(pytest.fail.Exception, match="STRATA_REQUIRE_POSTGRES=1 requires it"):
        missing.require()
