"""A command hook's process group does not outlive the `strata` process that runs it. A real `strata run` is killed
with SIGKILL while a PreToolUse hook from the user's config blocks (and has started a grandchild in its group):
the whole group goes at once, so a `strata resume` that runs the hook again never runs it beside the old one.
(Unlike a `bash` call's command, which is recorded and left to the resume to wait for or kill: tests/cli/
test_orphans.py.)"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, group_members, kill_group, wait_for, wait_group_gone
from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

HOOK = """\
echo $$ >> hook.pid
sleep 300 >/dev/null 2>&1 &
echo $! >> grandchild.pid
echo yes >> started
while [ ! -e release ] && [ $SECONDS -lt 300 ]; do sleep 0.05; done
echo done >> hook-done
"""


def test_a_blocking_hook_and_its_grandchild_die_with_a_killed_strata(cli: StrataCLI, workspace: Path,
                                                                     tmp_path: Path) -> None:
    hook = tmp_path / "hook.sh"
    hook.write_text(HOOK)
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[[hooks.pre_tool_use]]\nmatcher = "write_file"\ncommand = "bash {hook}"\ntimeout_s = 300\n')
    script = write_script(tmp_path / "turns.json", [
        [tool_use("c1", "write_file", path="out.txt", content="hi\n")], [text("done")]])
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file",
                     "--json", "go")
    pgid = None
    try:
        wait_for(workspace / "started", proc)
        hook_pid = int((workspace / "hook.pid").read_text())
        pgid = os.getpgid(hook_pid)
        grandchild = int((workspace / "grandchild.pid").read_text())
        assert {hook_pid, grandchild} <= set(group_members(pgid)), "the hook's group is not what the test thinks"
        proc.send_signal(signal.SIGKILL)
        assert finish(proc).returncode == -signal.SIGKILL

        assert wait_group_gone(pgid, timeout=10), f"the hook's group outlived strata: {group_members(pgid)}"

        # The resume runs the hook again (alone: the first one is gone), and this time it answers.
        (workspace / "release").touch()
        (row,) = json_lines_in_process(cli, "sessions", "--json")
        resumed = strata(cli, "resume", row["id"], "--json")
        assert resumed.returncode == 0, resumed.stderr
        result = result_line(resumed.stdout)
        assert result is not None and result["status"] == "completed", resumed.stdout
        assert (workspace / "started").read_text().splitlines() == ["yes", "yes"]
        assert (workspace / "hook-done").read_text().splitlines() == ["done"], "the killed hook ran on"
        assert (workspace / "out.txt").read_text() == "hi\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        (workspace / "release").touch()
        if pgid is not None:
            kill_group(pgid)
