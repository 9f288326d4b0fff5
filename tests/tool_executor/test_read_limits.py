"""The read tools' bounds, handlers called directly: a stoppable worker thread, capped reads with offsets, the edit
cap, FIFOs refused by the probes, grep's long lines and large files, a walk that sees its stop flag."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from core.tools import Stop, Stopped, ToolContext, ToolError, run_stoppable
from tool_executor.builtin import _grep, fs
from tool_executor.builtin._walk import Walker


def ctx(workspace: Path, deadline_s: float = 30) -> ToolContext:
    return ToolContext(session_id="s", mode="headless", model="test", turn=1, call_id="c1", workspace=workspace,
                       idempotency_key="idem_test", deadline_s=deadline_s)


async def test_a_cancelled_wait_returns_at_once_and_the_work_stops() -> None:
    """run_stoppable stops waiting on cancellation (a deadline) and the thread sees its stop flag and ends."""
    ended = threading.Event()

    def spin(stop: Stop) -> None:
        try:
            while True:
                stop.check()
                time.sleep(0.01)
        finally:
            ended.set()

    started = time.monotonic()
    with anyio.move_on_after(0.2):
        await run_stoppable(spin)
    assert time.monotonic() - started < 2
    assert await anyio.to_thread.run_sync(ended.wait, 5)


def test_a_walk_sees_its_stop_flag(workspace: Path) -> None:
    """A walk over a tree raises Stopped at its next entry once the flag is up."""
    for i in range(20):
        (workspace / f"d{i}").mkdir()
    stop = Stop()
    walker = Walker(workspace, None, stop)
    stop.set()
    with pytest.raises(Stopped):
        list(walker.glob("**/*"))


async def test_read_file_reads_a_part_with_offset_and_limit(workspace: Path) -> None:
    """offset and limit read a window of the file, and the first line says which bytes it shows."""
    (workspace / "f.txt").write_text("0123456789")
    out = await fs.read_file({"path": "f.txt", "offset": 2, "limit": 3}, ctx(workspace))
    assert out.text == "[showing bytes 2 to 5 of 10 of f.txt; read on with offset=5]\n234"
    tail = await fs.read_file({"path": "f.txt", "offset": 7}, ctx(workspace))
    assert tail.text == "[showing bytes 7 to 10 of 10 of f.txt]\n789"
    assert (await fs.read_file({"path": "f.txt"}, ctx(workspace))).text == "0123456789"
    past = await fs.read_file({"path": "f.txt", "offset": 50}, ctx(workspace))
    assert past.text == "[nothing at offset 50: f.txt has 10 bytes]\n"


async def test_edit_file_refuses_a_file_over_its_cap(workspace: Path) -> None:
    """edit_file needs the whole file in memory: over 16 MiB it refuses, and the file is unchanged."""
    big = workspace / "big.txt"
    with big.open("wb") as fh:
        fh.write(b"old text\n")
        fh.truncate(17 * 1024 * 1024)
    with pytest.raises(ToolError, match="too large to edit"):
        await fs.edit_file({"path": "big.txt", "old": "old", "new": "new"}, ctx(workspace))
    with big.open("rb") as fh:
        assert fh.read(9) == b"old text\n"


async def test_probes_on_a_fifo_are_undecided_at_once(workspace: Path) -> None:
    """A reconciliation probe never blocks on a FIFO: it cannot decide, and says why."""
    os.mkfifo(workspace / "pipe")
    with anyio.fail_after(5):
        wrote = await fs.probe_write({"path": "pipe", "content": "x"}, ctx(workspace))
        edited = await fs.probe_edit({"path": "pipe", "old": "a", "new": "b"}, ctx(workspace))
    assert wrote.verdict == edited.verdict == "undecided"
    assert "not a regular file (a FIFO)" in wrote.note


async def test_grep_cuts_long_lines_between_words(workspace: Path) -> None:
    """A matching line longer than the cap is cut before the word the cap falls in, and marked."""
    (workspace / "long.txt").write_text(("word " * 1000) + "needle\n")
    out = await fs.grep({"pattern": "needle"}, ctx(workspace))
    name, number, shown = out.text.split(":", 2)
    assert (name, number) == ("long.txt", "1")
    assert shown.endswith(" [line cut]") and len(shown) <= _grep.MAX_LINE + len(" [line cut]")
    assert shown.removesuffix(" [line cut]").rstrip().endswith("word")


async def test_grep_counts_files_too_large_to_search(workspace: Path) -> None:
    """A file over grep's per-file cap is not read, and the result says so."""
    with (workspace / "huge.log").open("wb") as fh:
        fh.write(b"needle\n")
        fh.truncate(_grep.MAX_FILE + 1)
    (workspace / "small.txt").write_text("needle\n")
    out = await fs.grep({"pattern": "needle"}, ctx(workspace))
    assert out.text == "small.txt:1:needle\n[1 file(s) over 2 MiB not searched]"


async def test_grep_walks_and_searches_a_fifo_never(workspace: Path) -> None:
    """A FIFO in the tree is passed over by the walk (a grep of the workspace ends at once)."""
    os.mkfifo(workspace / "pipe")
    (workspace / "a.txt").write_text("needle\n")
    with anyio.fail_after(10):
        out = await fs.grep({"pattern": "needle"}, ctx(workspace))
    assert out.text == "a.txt:1:needle"


async def test_grep_on_a_fifo_or_a_missing_path_says_so(workspace: Path) -> None:
    """grep given a FIFO as its path refuses it like read_file; a missing path is an error, not '(no matches)'."""
    os.mkfifo(workspace / "pipe")
    with anyio.fail_after(10):
        with pytest.raises(ToolError, match=r"pipe is not a regular file \(a FIFO\)"):
            await fs.grep({"pattern": "x", "path": "pipe"}, ctx(workspace))
        with pytest.raises(ToolError, match="cannot read nope: No such file or directory"):
            await fs.grep({"pattern": "x", "path": "nope"}, ctx(workspace))


def test_the_search_process_ends_at_its_own_deadline(workspace: Path) -> None:
    """The grep child sets a timer for its deadline: even with nobody left to kill it, a catastrophic match ends
    (SIGALRM, unhandled, terminates it in the middle of the match)."""
    import json
    import signal
    import subprocess

    (workspace / "line.txt").write_text("a" * 34 + "!\n")
    header = {"pattern": "(a+)+$", "max_matches": 5, "max_file": 1024, "max_line": 100, "deadline_s": 1,
              "parent": os.getpid()}
    feed = json.dumps(header) + "\n" + json.dumps([str(workspace / "line.txt"), "line.txt"]) + "\n"
    started = time.monotonic()
    child = subprocess.run(_grep._search_process_argv(), input=feed, text=True, capture_output=True, timeout=30,
                           env={})
    assert child.returncode == -signal.SIGALRM, (child.returncode, child.stderr)
    assert time.monotonic() - started < 10
