"""Two real `strata` processes whose tools touch the same resource never interleave: the second waits for the
first's lock (a file lock under the shared Strata home)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script


def test_two_processes_writing_one_file_do_not_interleave(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A holds the workspace's shell lock while it sleeps between its two lines; B, started after A's first line,
    waits, so the file reads A1 A2 B1 B2 (without the lock it would read A1 B1 B2 A2)."""
    log = workspace / "shared.log"
    a = write_script(tmp_path / "a.json", [
        [tool_use("toolu_a", "bash", command=f"echo A1 >> {log}; sleep 1.5; echo A2 >> {log}")], [text("a done")]])
    b = write_script(tmp_path / "b.json", [
        [tool_use("toolu_b", "bash", command=f"echo B1 >> {log}; echo B2 >> {log}")], [text("b done")]])
    first = cli.popen("run", "--model", f"script:{a}", "--workspace", str(workspace), "--allow", "bash", "a")
    deadline = time.monotonic() + 30
    while not (log.exists() and log.read_text().startswith("A1")):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "A never wrote its first line"
        time.sleep(0.02)
    second = cli.run("run", "--model", f"script:{b}", "--workspace", str(workspace), "--allow", "bash", "b")
    _out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert second.returncode == 0, second.stderr
    assert log.read_text().split() == ["A1", "A2", "B1", "B2"]
