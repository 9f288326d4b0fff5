"""The built-in tools, run for real on a temporary workspace (handlers called directly with a ToolContext)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from core.tools import ToolContext, ToolError, ToolTimeout
from tool_executor.builtin import builtin_tools, fs, shell


def ctx(workspace: Path) -> ToolContext:
    return ToolContext(session_id="s", mode="headless", model="test", turn=1, call_id="c1", workspace=workspace,
                       idempotency_key="idem_test", deadline_s=30)


def real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def current_umask() -> int:
    """Read without changing it (os.umask would briefly set it process-wide)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    pytest.skip("no /proc/self/status umask on this platform")


def test_builtin_tool_set() -> None:
    """The built-in set is the seven documented tools, with read-only and effectful classes as designed."""
    specs = {s.name: s for s in builtin_tools()}
    assert sorted(specs) == ["bash", "edit_file", "glob", "grep", "list_dir", "read_file", "write_file"]
    assert {n for n, s in specs.items() if s.effect == "read_only"} == {"read_file", "list_dir", "glob", "grep"}
    assert {n for n, s in specs.items() if s.effect == "effectful"} == {"write_file", "edit_file", "bash"}


# -- read_file ---------------------------------------------------------------------------------------------


async def test_read_file_returns_content(workspace: Path) -> None:
    """read_file returns the file's text exactly, including non-ASCII and CRLF."""
    (workspace / "a.txt").write_bytes("héllo\r\nwörld".encode())
    out = await fs.read_file({"path": "a.txt"}, ctx(workspace))
    assert out.text == "héllo\r\nwörld" and not out.is_error


async def test_read_file_errors(workspace: Path) -> None:
    """A missing file or a directory is a clean ToolError naming the path."""
    (workspace / "d").mkdir()
    with pytest.raises(ToolError, match=r"missing\.txt"):
        await fs.read_file({"path": "missing.txt"}, ctx(workspace))
    with pytest.raises(ToolError, match="is a directory"):
        await fs.read_file({"path": "d"}, ctx(workspace))


# -- write_file --------------------------------------------------------------------------------------------


async def test_write_file_creates_parents_and_exact_content(workspace: Path) -> None:
    """write_file creates missing parent directories and writes exactly the given text, leaving no temp file."""
    content = "line 1\r\nüñï\n\tno newline at end"
    out = await fs.write_file({"path": "a/b/c.txt", "content": content}, ctx(workspace))
    target = workspace / "a" / "b" / "c.txt"
    assert target.read_bytes() == content.encode("utf-8")
    assert f"wrote {len(content.encode())} bytes to a/b/c.txt" == out.text
    assert os.listdir(workspace / "a" / "b") == ["c.txt"]


async def test_write_file_replaces_atomically_and_preserves_mode(workspace: Path) -> None:
    """Overwriting keeps the file's permission bits, replaces the inode (rename), and leaves no temp file."""
    target = workspace / "run.sh"
    target.write_text("old contents that are longer than the new ones\n")
    target.chmod(0o751)
    inode_before = target.stat().st_ino
    await fs.write_file({"path": "run.sh", "content": "new\n"}, ctx(workspace))
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.stat().st_ino != inode_before  # renamed over, not truncated in place
    assert os.listdir(workspace) == ["run.sh"]


async def test_write_file_new_file_mode_follows_umask(workspace: Path) -> None:
    """A new file gets the usual mode for new files (0666 minus the umask), not the temp file's private 0600."""
    await fs.write_file({"path": "new.txt", "content": "x"}, ctx(workspace))
    assert stat.S_IMODE((workspace / "new.txt").stat().st_mode) == 0o666 & ~current_umask()


async def test_write_file_empty_content(workspace: Path) -> None:
    """Empty content makes an empty file."""
    await fs.write_file({"path": "empty", "content": ""}, ctx(workspace))
    assert (workspace / "empty").read_bytes() == b""


async def test_write_file_onto_directory_is_error(workspace: Path) -> None:
    """Writing onto an existing directory is a ToolError; the directory is untouched and no temp file is left."""
    (workspace / "d").mkdir()
    (workspace / "d" / "keep").write_text("k")
    with pytest.raises(ToolError, match="is a directory"):
        await fs.write_file({"path": "d", "content": "x"}, ctx(workspace))
    assert os.listdir(workspace) == ["d"]
    assert os.listdir(workspace / "d") == ["keep"]


# -- edit_file ---------------------------------------------------------------------------------------------


async def test_edit_file_replaces_unique_match(workspace: Path) -> None:
    """An exact, unique excerpt is replaced once; everything else is byte-identical and the mode kept."""
    target = workspace / "m.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    target.chmod(0o755)
    out = await fs.edit_file({"path": "m.py", "old": "return 1", "new": "return 10"}, ctx(workspace))
    assert target.read_text() == "def f():\n    return 10\n\ndef g():\n    return 2\n"
    assert "replaced 1 occurrence" in out.text
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert os.listdir(workspace) == ["m.py"]


async def test_edit_file_no_match_leaves_file_unchanged(workspace: Path) -> None:
    """Zero matches is an error and the file is not rewritten."""
    target = workspace / "m.txt"
    target.write_text("alpha beta\n")
    before = target.stat()
    with pytest.raises(ToolError, match="not found"):
        await fs.edit_file({"path": "m.txt", "old": "gamma", "new": "delta"}, ctx(workspace))
    assert target.read_text() == "alpha beta\n"
    assert target.stat().st_ino == before.st_ino and target.stat().st_mtime_ns == before.st_mtime_ns


async def test_edit_file_ambiguous_match_leaves_file_unchanged(workspace: Path) -> None:
    """Two or more matches is an error saying how many, and the file is not rewritten."""
    target = workspace / "m.txt"
    target.write_text("x = 1\ny = 1\nz = 1\n")
    before = target.stat()
    with pytest.raises(ToolError, match="occurs 3 times"):
        await fs.edit_file({"path": "m.txt", "old": "= 1", "new": "= 2"}, ctx(workspace))
    assert target.read_text() == "x = 1\ny = 1\nz = 1\n"
    assert target.stat().st_ino == before.st_ino and target.stat().st_mtime_ns == before.st_mtime_ns


async def test_edit_file_missing_file_is_error(workspace: Path) -> None:
    """Editing a file that does not exist is an error and creates nothing."""
    with pytest.raises(ToolError, match=r"nope\.txt"):
        await fs.edit_file({"path": "nope.txt", "old": "a", "new": "b"}, ctx(workspace))
    assert not (workspace / "nope.txt").exists()


# -- list_dir, glob, grep ----------------------------------------------------------------------------------


async def test_list_dir(workspace: Path) -> None:
    """list_dir lists names sorted, marks directories with '/', and reports an empty directory."""
    (workspace / "b.txt").write_text("")
    (workspace / "a_dir").mkdir()
    (workspace / "c.txt").write_text("")
    assert (await fs.list_dir({"path": "."}, ctx(workspace))).text == "a_dir/\nb.txt\nc.txt"
    assert (await fs.list_dir({"path": "a_dir"}, ctx(workspace))).text == "(empty directory)"
    with pytest.raises(ToolError, match="not a directory"):
        await fs.list_dir({"path": "b.txt"}, ctx(workspace))


async def test_glob(workspace: Path) -> None:
    """glob matches recursively, relative to the workspace, sorted; no match says so."""
    for rel in ("pkg/mod.py", "pkg/sub/deep.py", "top.py", "notes.md"):
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text("")
    assert (await fs.glob_files({"pattern": "**/*.py"}, ctx(workspace))).text == "pkg/mod.py\npkg/sub/deep.py\ntop.py"
    assert (await fs.glob_files({"pattern": "*.md"}, ctx(workspace))).text == "notes.md"
    assert (await fs.glob_files({"pattern": "*.rs"}, ctx(workspace))).text == "(no matches)"


async def test_grep_regex_and_optional_path(workspace: Path) -> None:
    """grep finds regex matches as path:line:text across the workspace, or only under the given path."""
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("import os\nx = 42\n")
    (workspace / "b.txt").write_text("nothing\nvalue=7\n")
    everywhere = await fs.grep({"pattern": r"\d+$"}, ctx(workspace))
    assert everywhere.text.splitlines() == ["b.txt:2:value=7", "src/a.py:2:x = 42"]
    narrowed = await fs.grep({"pattern": r"\d+$", "path": "src"}, ctx(workspace))
    assert narrowed.text == "src/a.py:2:x = 42"
    one_file = await fs.grep({"pattern": "^no", "path": "b.txt"}, ctx(workspace))
    assert one_file.text == "b.txt:1:nothing"
    assert (await fs.grep({"pattern": "zzz"}, ctx(workspace))).text == "(no matches)"


async def test_grep_skips_binary_files(workspace: Path) -> None:
    """A file with NUL bytes near its start is treated as binary and not searched."""
    (workspace / "bin.dat").write_bytes(b"\x00\x01needle\n")
    (workspace / "t.txt").write_text("needle\n")
    assert (await fs.grep({"pattern": "needle"}, ctx(workspace))).text == "t.txt:1:needle"


async def test_grep_invalid_regex_is_error(workspace: Path) -> None:
    """An invalid regular expression is a clean ToolError, not a crash."""
    with pytest.raises(ToolError, match="invalid regular expression"):
        await fs.grep({"pattern": "([unclosed"}, ctx(workspace))


# -- bash --------------------------------------------------------------------------------------------------


async def test_bash_output_and_exit_code(workspace: Path) -> None:
    """bash runs in the workspace, returns stdout and stderr together, and reports exit code 0 as success."""
    out = await shell.bash({"command": "pwd; echo out; echo err >&2"}, ctx(workspace))
    assert not out.is_error
    lines = out.text.splitlines()
    assert lines[0] == "exit code 0"
    assert lines[1] == str(real(workspace))
    assert set(lines[2:]) == {"out", "err"}


async def test_bash_nonzero_exit_is_error(workspace: Path) -> None:
    """A non-zero exit code is reported with the output and marked is_error."""
    out = await shell.bash({"command": "echo failing; exit 3"}, ctx(workspace))
    assert out.is_error
    assert out.text == "exit code 3\nfailing\n"


async def test_bash_does_not_leak_fault_injection_env(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """STRATA_FAULT (crash-test injection) is not passed to commands, so a nested strata is not killed by it."""
    monkeypatch.setenv("STRATA_FAULT", "after_commit")
    out = await shell.bash({"command": 'echo "fault=${STRATA_FAULT-unset}"'}, ctx(workspace))
    assert "fault=unset" in out.text


def _gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie waiting for a reaper that is not us)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return status[status.rindex(")") + 2:].startswith("Z")


def wait_gone(pid: int, within_s: float = 1.0) -> bool:
    """Poll briefly: a SIGKILLed process disappears (or turns zombie) almost at once."""
    deadline = time.monotonic() + within_s
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _gone(pid)


async def test_bash_timeout_kills_the_process_group(workspace: Path) -> None:
    """On timeout_s the whole process group is killed, including a background child, and ToolTimeout raised."""
    pid_file = workspace / "child.pid"
    started = time.monotonic()
    with pytest.raises(ToolTimeout, match=r"timed out after 0\.5 s"):
        await shell.bash({"command": f"sleep 30 & echo $! > {pid_file.name}; wait", "timeout_s": 0.5},
                         ctx(workspace))
    assert time.monotonic() - started < 5
    child = int(pid_file.read_text())
    assert wait_gone(child), f"background child {child} survived the timeout"


async def test_bash_background_child_killed_after_normal_exit(workspace: Path) -> None:
    """A child left running with its output redirected is killed with the group when the command returns."""
    out = await shell.bash({"command": "sleep 30 >/dev/null 2>&1 & echo $! > child.pid; echo started"},
                           ctx(workspace))
    assert out.text == "exit code 0\nstarted\n"
    child = int((workspace / "child.pid").read_text())
    assert wait_gone(child), f"background child {child} survived the command"


async def test_glob_degenerate_patterns_fail_cleanly(workspace: Path) -> None:
    """Degenerate patterns ('.', '**', './*') give a listing or a clean ToolError, never an internal exception."""
    (workspace / "f.txt").write_text("")
    outcomes: dict[str, str] = {}
    for pattern in (".", "**", "./*"):
        try:
            outcomes[pattern] = (await fs.glob_files({"pattern": pattern}, ctx(workspace))).text
        except ToolError as exc:
            outcomes[pattern] = f"ToolError: {exc}"
    assert outcomes["./*"] == "f.txt"
    assert all(isinstance(v, str) and v for v in outcomes.values())
