"""The project's `.strata/` directory is never written by the agent's tools: a built-in deny of the scope step that
no rule, grant, approval, middleware or hook rewrite lifts; and a command hook whose precheck refuses does not run
(fail closed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.testing import PyHook, StrictApprover
from core.hooks import HookRewrite, HookSet
from core.ids import IdFactory
from core.state import Grant
from core.tools import BoundToolPlan
from memory.session_writer import SessionWriter
from tests.tool_executor._pipeline import (
    Route,
    command_hook,
    env,
    planned,
    rules,
    run_calls,
    script,
    sqlite_session,
)
from tool_executor import DEFAULT_MIDDLEWARE, Deny, Pass, ToolCallProcessor, builtin_tools
from tool_executor.paths import names_project_dir

PLAN = BoundToolPlan(builtin_tools(), "headless")
DEFAULT_ASK = "default: write tools ask in every mode"


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / ".strata").mkdir()
    (workspace / ".strata" / "config.toml").write_text("max_turns = 3\n")
    return workspace


@pytest.fixture
async def writer(tmp_path: Path, ws: Path) -> AsyncIterator[SessionWriter]:
    async with sqlite_session(tmp_path, ws, PLAN) as w:
        yield w


def _scope_denied(verdict: object) -> str:
    assert isinstance(verdict, Deny) and verdict.check == "scope", verdict
    return " | ".join(verdict.reasons)


async def test_a_grant_and_a_willing_approver_do_not_lift_the_deny(ws: Path) -> None:
    """A session grant for write_file and a person ready to say yes: the write into `.strata/` is denied by scope
    before either is consulted."""
    approver = StrictApprover()  # fails the test if asked
    processor = ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory(), approver=approver)
    decision = await processor.decide(planned("write_file", {"path": ".strata/x.py", "content": "x"}),
                                      env(grants=(Grant("write_file", DEFAULT_ASK, "person:earlier"),)))
    assert ".strata/ directory" in _scope_denied(decision.verdict)
    assert approver.asked == []


async def test_a_hook_rewrite_into_strata_is_denied_by_the_scope_recheck(ws: Path) -> None:
    """A Python hook that moves an allowed write into `.strata/` gets the call denied by scope after the rewrite."""
    hook = PyHook(lambda d: HookRewrite({**d.input, "path": ".Strata/../.strata/config.toml"}), name="mover")
    processor = ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory(), hooks=HookSet((hook.hook,)))
    decision = await processor.decide(planned("write_file", {"path": "ok.txt", "content": "x"}),
                                      env(rules=rules("+write_file")))
    assert _scope_denied(decision.verdict).startswith("after the rewrite by hook mover (code): path: ")


def test_a_middleware_route_into_strata_is_denied(ws: Path) -> None:
    """Request middleware that routes a call to a path in `.strata/` is re-checked and denied."""
    route = Route("write_file", "write_file", lambda a: {**a, "path": ".strata/hooks.py"})
    processor = ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory(), middleware=(*DEFAULT_MIDDLEWARE, route))
    checked = processor.check("write_file", {"path": "fine.txt", "content": "x"}, rules("+write_file"), "headless")
    assert ".strata/ directory" in _scope_denied(checked.verdict)


@pytest.mark.parametrize(("tool", "args"), [
    ("read_file", {"path": ".strata/config.toml"}),
    ("list_dir", {"path": ".strata"}),
    ("grep", {"pattern": "max", "path": ".strata"}),
])
def test_reading_the_strata_directory_is_not_denied_by_scope(ws: Path, tool: str, args: dict[str, str]) -> None:
    """Only tools that may write are kept out: reading the project's config is allowed as any other file."""
    processor = ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory())
    assert isinstance(processor.check(tool, args, (), "headless").verdict, Pass)


@pytest.mark.parametrize(("command", "named"), [
    ("cat .strata/config.toml", True),
    ("echo x>.strata/a", True),
    ("cd '.str''ata'", True),
    ('touch ".STRATA/x"', True),
    ("cp a b{.strata,}", True),
    ("X=.strata make", True),
    ("d=.stra; cp a ${d}ta/x", False),  # built at run time: only the check of the hook files catches it
    ("ls .strata_backup my.strata2", False),
    ("strata timeline ID", False),
])
def test_names_project_dir_reads_the_words_after_unquoting(command: str, named: bool) -> None:
    """A command names `.strata` when any word does, as written or after the shell's unquoting, in any case."""
    assert names_project_dir(command) is named


async def test_a_refusing_precheck_blocks_the_command_hook_without_running_it(tmp_path: Path, ws: Path,
                                                                             writer: SessionWriter) -> None:
    """A command hook whose precheck gives a reason is not started: the call is blocked (fail closed) with it."""
    ran = tmp_path / "ran"
    path = script(tmp_path, "allow.sh", f"touch {ran}\n")
    hook = command_hook(path)
    hook = type(hook)(hook.name, hook.event, hook.matcher, command=hook.command, timeout_s=hook.timeout_s,
                      source=hook.source, precheck=lambda: "guard.sh changed since the project was trusted")
    processor = ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory(), hooks=HookSet((hook,)))
    results = await run_calls(processor, writer, [planned("write_file", {"path": "out.txt", "content": "x"})],
                              env(rules=rules("+write_file")))
    result = results["c1"]
    assert (result.status, result.check) == ("denied", "hook")
    assert "fail closed" in result.content and "guard.sh changed since the project was trusted" in result.content
    assert not ran.exists() and not (ws / "out.txt").exists()
