"""`strata export -o PATH` writes a regular file atomically: a temporary file beside PATH, renamed over it. When
that directory cannot take a new file, the error says so: before, `-o /proc/version` said "cannot write
/proc/version: No such file or directory", blaming a file that exists for its directory's refusal (procfs makes no
files, as root too). A missing directory and a parent that is a file are named as such (real `strata` processes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._in_process_cli import set_up_in_process
from tests.cli._helpers import assert_clean_stderr, error_lines, text
from tests.conftest import StrataCLI, write_script


@pytest.fixture
def session(cli: StrataCLI, tmp_path: Path, workspace: Path) -> str:
    script = write_script(tmp_path / "s.json", [[text("done")]])
    run = set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    assert run.returncode == 0, run.stderr
    return str(json.loads(run.stdout.splitlines()[0])["session_id"])


def _one_error(cli: StrataCLI, *args: str) -> str:
    proc = cli.run(*args)
    assert_clean_stderr(proc)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    (line,) = error_lines(proc.stderr)
    return line


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs procfs, whose directory makes no files")
def test_export_into_a_directory_that_takes_no_new_file_names_the_directory(cli: StrataCLI, session: str) -> None:
    before = Path("/proc/version").read_text()
    line = _one_error(cli, "export", session, "-o", "/proc/version")
    assert line.startswith("strata: error: cannot write /proc/version: its directory /proc cannot take a new file"), \
        line
    assert "No such file or directory" in line  # the system's word, kept, now after what it is about
    assert Path("/proc/version").read_text() == before


def test_export_into_a_missing_directory_or_under_a_file_names_that(cli: StrataCLI, session: str,
                                                                    tmp_path: Path) -> None:
    missing = _one_error(cli, "export", session, "-o", str(tmp_path / "missing" / "out.html"))
    assert f"cannot write {tmp_path}/missing/out.html: its directory {tmp_path}/missing does not exist" in missing
    (tmp_path / "plain").write_text("a file\n")
    under = _one_error(cli, "export", session, "-o", str(tmp_path / "plain" / "out.html"))
    assert f"cannot write {tmp_path}/plain/out.html: {tmp_path}/plain is not a directory" in under
    assert (tmp_path / "plain").read_text() == "a file\n"


def test_export_under_a_link_to_nothing_names_the_link_and_what_it_names(cli: StrataCLI, session: str,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    line = _one_error(cli, "export", session, "-o", str(tmp_path / "gone" / "out.html"))
    assert f"cannot write {tmp_path}/gone/out.html: {tmp_path}/gone is a link to {tmp_path}/nowhere, which does " \
           "not exist" in line, line
    assert not (tmp_path / "nowhere").exists()
