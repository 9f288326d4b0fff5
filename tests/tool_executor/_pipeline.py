"""Shared parts for the tool-call path tests: calls and envs, fake tools, routing middleware, command-hook
scripts, and a real SQLite session to run batches through. The strict approver and Python hook are agent.testing's."""

from __future__ import annotations

import contextlib
import stat
import textwrap
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio

from core.clock import SystemClock
from core.events import BatchProposed, CallResult, Mode, PlannedCall, SessionStarted, UserMessage
from core.hashing import sha256_json
from core.hooks import Hook, HookEvent
from core.ids import IdFactory
from core.messages import ToolUseBlock
from core.policy import PermissionRule, parse_rule
from core.state import Approval, Grant
from core.tools import BoundToolPlan, PiiClass, SafetyLevel, ToolContext, ToolOutput, ToolSpec
from memory import SessionRecord, SqliteEventStore, Write
from memory.session_writer import SessionWriter
from tool_executor import CallEnv, Rewrite

PLAN_DIGEST = "plan_test"
SESSION = "sess_test"
PERSON = "person:tester"

Answer = Literal["yes", "no", "always"]


# -- calls, rules, envs ------------------------------------------------------------------------------------


def planned(tool: str, args: Mapping[str, Any], call_id: str = "c1") -> PlannedCall:
    return PlannedCall(call_id=call_id, tool=tool, input=dict(args), input_sha256=sha256_json(dict(args)))


def rules(*specs: str) -> tuple[PermissionRule, ...]:
    """`+tool` allows, `-tool` denies, `?tool` asks (flag syntax, e.g. `-bash(rm*)`)."""
    actions = {"+": "allow", "-": "deny", "?": "ask"}
    return tuple(parse_rule(actions[s[0]], s[1:]) for s in specs)  # type: ignore[arg-type]


def env(*, rules: Sequence[PermissionRule] = (), grants: Sequence[Grant] = (),
        approvals: Mapping[str, Approval] | None = None, mode: Mode = "headless",
        plan_digest: str = PLAN_DIGEST) -> CallEnv:
    return CallEnv(session_id=SESSION, mode=mode, model="m", turn=1, plan_digest=plan_digest, rules=tuple(rules),
                   grants=tuple(grants), approvals=dict(approvals or {}))


def script(tmp_path: Path, name: str, body: str) -> Path:
    """An executable bash script under tmp_path/hooks (outside the workspace)."""
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + textwrap.dedent(body).lstrip("\n"))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def command_hook(path: Path, *, name: str = "cmd", event: HookEvent = "pre_tool_use", matcher: str = "*",
                 timeout_s: float = 10.0) -> Hook:
    return Hook(name, event, matcher, command=str(path), timeout_s=timeout_s, source="test-config")


# -- tools and middleware ----------------------------------------------------------------------------------

PATH_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string", "minLength": 1}, "content": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


def fake_tool(name: str, *, safety: SafetyLevel, pii: PiiClass = "none", calls: list[tuple[str, dict[str, Any]]]
              | None = None) -> ToolSpec:
    """A tool with one path argument whose handler records (tool, args) and touches nothing."""

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        if calls is not None:
            calls.append((name, dict(args)))
        return ToolOutput(f"{name} ran on {args.get('path')}")

    return ToolSpec(name, f"fake {name}", PATH_SCHEMA, handler, safety=safety, pii=pii,
                    effect="read_only" if safety == "read" else "effectful", path_args=("path",),
                    primary_arg="path", primary_kind="path")


@dataclass
class Route:
    """Request middleware that routes calls of `source` to `target`, with `args` rewritten by `change`."""

    source: str
    target: str
    change: Callable[[Mapping[str, Any]], Mapping[str, Any]] = dict
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> Rewrite | None:
        self.seen.append((spec.name, dict(args)))
        if spec.name != self.source:
            return None
        return Rewrite(self.target, self.change(args), f"routed {self.source} to {self.target}", "middleware:route")


# -- a real session to run batches in ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sqlite_session(tmp_path: Path, workspace: Path, plan: BoundToolPlan) -> AsyncIterator[SessionWriter]:
    """A session in a real SQLite file under tmp_path, and the writer the loop would use for it."""
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    try:
        now = SystemClock().now()
        ws = str(await anyio.Path(workspace).resolve())
        record = SessionRecord(id=SESSION, created_at=now, updated_at=now, mode="headless", workspace=ws,
                               model="m", status="active")
        started = SessionStarted(session_id=SESSION, mode="headless", workspace=ws, model="m", max_turns=5,
                                 plan_digest=plan.digest)
        await store.create_session(record, Write(events=[(started, 0), (UserMessage(text="go"), 0)]))
        yield SessionWriter(store, SESSION)
    finally:
        await store.close()


async def run_calls(processor: Any, writer: SessionWriter, calls: Sequence[PlannedCall],
                    call_env: CallEnv | None = None) -> dict[str, CallResult]:
    """Propose `calls` as one batch, run it, commit, and return the stored result of each call."""
    batch = BatchProposed(batch_id=IdFactory().uuid7(), calls=tuple(calls),
                          content=tuple(ToolUseBlock(id=c.call_id, name=c.tool, input=c.input) for c in calls))
    writer.stage(batch, 1)
    await processor.run_batch(batch, env=call_env or env(), writer=writer)
    await writer.flush()
    stored = await writer.store.read_events(SESSION)
    return {e.event.call_id: e.event for e in stored if isinstance(e.event, CallResult)}


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


async def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    for _ in range(int(within_s / 0.05)):
        if not pid_alive(pid):
            return True
        await anyio.sleep(0.05)
    return not pid_alive(pid)
