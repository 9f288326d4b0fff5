"""The bash tool reports the process group it starts before the command runs (so that a later process can find
the command if Strata dies while it runs), and runs nothing if that report fails."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core.processes import ProcessGroup
from core.tools import ToolContext, ToolError
from tool_executor.builtin.shell import bash

COMMAND = "echo ran > ran.txt; echo $$ > pid.txt"


def _ctx(workspace: Path) -> ToolContext:
    return ToolContext(session_id="s", mode="headless", model="test", turn=1, call_id="c1", workspace=workspace,
                       idempotency_key="idem_test", deadline_s=30)


async def test_the_group_is_reported_before_the_command_runs(workspace: Path) -> None:
    """When the report arrives the group's leader exists and the command has not run; the leader then becomes the
    command (same pid: the group it reported is the command's)."""
    seen: list[tuple[ProcessGroup, str, bool]] = []

    async def spawned(group: ProcessGroup) -> None:
        seen.append((group, group.state(), (workspace / "ran.txt").exists()))

    output = await bash({"command": COMMAND}, replace(_ctx(workspace), on_spawn=spawned))
    assert not output.is_error, output.text
    ((group, state, ran_before),) = seen
    assert state == "running" and not ran_before
    assert int((workspace / "pid.txt").read_text()) == group.pid == group.pgid
    assert group.state() == "gone"  # the command ended and its group with it


async def test_a_failed_report_runs_nothing(workspace: Path) -> None:
    """If the group cannot be recorded, the gate stays shut: a clear error, the command never ran, no group left."""
    groups: list[ProcessGroup] = []

    async def refuse(group: ProcessGroup) -> None:
        groups.append(group)
        raise OSError("disk full")

    with pytest.raises(ToolError, match=r"not started.*disk full"):
        await bash({"command": COMMAND}, replace(_ctx(workspace), on_spawn=refuse))
    assert not (workspace / "ran.txt").exists()
    (group,) = groups
    assert group.state() == "gone"


async def test_the_command_sees_the_same_stdin_and_arguments_as_before(workspace: Path) -> None:
    """Behind the gate the command still reads /dev/null on stdin and runs as `bash -c COMMAND`."""
    output = await bash({"command": 'cat; echo "[$0] [$#]"; exe=$(readlink /proc/$$/exe); echo "$exe"'},
                        _ctx(workspace))
    assert output.text.splitlines()[1:2] == ["[/bin/bash] [0]"], output.text
    assert output.text.splitlines()[2].endswith("bash"), output.text
