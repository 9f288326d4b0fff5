"""`strata serve` refusing to start, with real processes: a socket path it cannot use is one line and exit 2, in
the terminal (`--foreground`) and from the detached daemon alike, never an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._helpers import error_lines
from tests.conftest import StrataCLI


def _unusable(kind: str, tmp_path: Path) -> Path:
    if kind == "a regular file":
        path = tmp_path / "not-a-socket"
        path.write_text("mine\n")
        return path
    if kind == "a missing directory":
        return tmp_path / "no" / "such" / "dir" / "d.sock"
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    return deep / "daemon.sock"


@pytest.mark.parametrize("kind", ["a regular file", "a missing directory", "a path too long"])
@pytest.mark.parametrize("foreground", [True, False], ids=["foreground", "detached"])
def test_serve_on_an_unusable_socket_path_says_why_in_one_line_and_exits_2(
        cli: StrataCLI, tmp_path: Path, kind: str, foreground: bool) -> None:
    path = _unusable(kind, tmp_path)
    before = path.read_text() if path.is_file() else None
    proc = cli.run("serve", *(["--foreground"] if foreground else []), "--socket", str(path), timeout=30)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert str(path) in line, line
    if before is not None:
        assert path.read_text() == before  # what was there is left alone


@pytest.mark.parametrize("command", [("serve", "--foreground"), ("serve",), ("ps",), ("attach", "some-id", "--json")])
def test_a_home_that_is_not_a_directory_is_one_error_line_for_the_daemon_commands(
        cli: StrataCLI, tmp_path: Path, command: tuple[str, ...]) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a directory\n")
    proc = cli.run(*command, env={"STRATA_HOME": str(home)}, input="", timeout=30)
    assert proc.returncode != 0
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    (line,) = error_lines(proc.stderr)
    assert str(home) in line, line


@pytest.mark.parametrize("given", [("--model", "script:other.json"), ("--workspace", "elsewhere")])
def test_attach_to_a_session_by_id_refuses_new_session_options_it_would_ignore(
        cli: StrataCLI, given: tuple[str, str]) -> None:
    proc = cli.run("attach", "some-id", *given, "--json", input="", timeout=30)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"{given[0]} goes with --new" in proc.stderr and "Traceback" not in proc.stderr
