"""The fixed order of a tool call's path (ARCHITECTURE.md 4, steps 1-7): where a call stops, why, and that
nothing after the deciding check ran (no hook called, no person asked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.testing import PyHook, StrictApprover
from core.hashing import sha256_json
from core.hooks import HookAllow, HookAsk, HookBlock, HookRewrite, HookSet
from core.ids import IdFactory
from core.state import Approval, Grant
from core.tools import BoundToolPlan
from tests.tool_executor._pipeline import (
    PERSON,
    PLAN_DIGEST,
    Answer,
    Route,
    env,
    fake_tool,
    planned,
    rules,
    run_calls,
    sqlite_session,
)
from tool_executor import DEFAULT_MIDDLEWARE, Decision, Deny, OnAsk, Pass, Step, ToolCallProcessor, builtin_tools
from tool_executor.approval import Parked

LATE = "a later check must not run"
BLOCK_LATE: Any = HookBlock(LATE)
WRITE = {"path": "b.txt", "content": "x"}
WRITE_DEFAULT_ASK = "default: write tools ask in every mode"
ORDER = ("resolve", "scope", "middleware", "policy", "schema", "hook", "approval")


def path_of(decision: Decision) -> tuple[str, ...]:
    return tuple(f"{s.check}:{s.outcome}" for s in decision.steps)


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    args: dict[str, Any]
    expect: Literal["pass", "deny", "parked"]
    check: str | None
    """The deciding check of a denial."""
    says: str
    """A fragment of the deciding reason (deny), of the allowing rule (pass) or of the park note (parked)."""
    path: tuple[str, ...]
    """Decision.steps as `check:outcome`."""
    rules: tuple[str, ...] = ()
    hook: Any = BLOCK_LATE
    """What the one PreToolUse hook answers; by default it blocks, so a case that should stop earlier shows it
    was never called."""
    routes: tuple[tuple[str, str], ...] = ()
    answers: tuple[Answer, ...] | None = ()
    """None: no approver at all; (): an approver that must not be asked."""
    on_ask: OnAsk = "deny"
    grants: tuple[Grant, ...] = ()
    approvals: dict[str, Approval] = field(default_factory=dict)
    events: tuple[str, ...] = ()
    asked: int = 0


CASES = [
    Case("unknown tool stops at resolve", "launch_rockets", {"path": "../x"}, "deny", "resolve",
         "unknown tool 'launch_rockets'", ("resolve:deny",), rules=("-*",)),
    Case("path outside the workspace stops at scope", "read_file", {"path": "../outside.txt"}, "deny", "scope",
         "outside the workspace", ("scope:deny",), rules=("-read_file",)),
    Case("middleware routing to a lower safety level stops at middleware", "write_file", WRITE, "deny",
         "middleware", "rewrite of write_file to read_file would lower the safety level from write to read",
         ("middleware:rewrite", "middleware:deny"), rules=("+write_file",), routes=(("write_file", "read_file"),)),
    Case("deny rule stops at policy", "bash", {"command": "rm -rf ."}, "deny", "policy",
         "denied by deny rule 'bash(rm*)'", ("policy:deny",), rules=("+bash", "-bash(rm*)")),
    Case("ask with no human is a policy denial naming --on-ask park", "write_file", WRITE, "deny", "policy",
         "--on-ask park", ("policy:deny",), answers=None),
    Case("schema error stops at schema", "read_file", {"path": "a.txt", "extra": 1}, "deny", "schema",
         "Additional properties are not allowed ('extra' was unexpected)", ("policy:allow", "schema:deny")),
    Case("hook block stops at hook", "read_file", {"path": "a.txt"}, "deny", "hook",
         "blocked by hook guard (code): not today", ("policy:allow", "hook:block"), hook=HookBlock("not today")),
    Case("hook ask answered no stops at approval", "read_file", {"path": "a.txt"}, "deny", "approval",
         f"rejected by {PERSON}: tester said so", ("policy:allow", "hook:ask", "approval:rejected"),
         hook=HookAsk("really?"), answers=("no",), events=("approval_rejected",), asked=1),
    Case("hook ask answered yes passes", "read_file", {"path": "a.txt"}, "pass", None, f"approved by {PERSON}",
         ("policy:allow", "hook:ask", "approval:approved"), hook=HookAsk("really?"), answers=("yes",),
         events=("approval_granted",), asked=1),
    Case("hook ask answered always adds a grant", "read_file", {"path": "a.txt"}, "pass", None,
         f"approved by {PERSON}", ("policy:allow", "hook:ask", "approval:approved"), hook=HookAsk("really?"),
         answers=("always",), events=("approval_granted", "grant_added"), asked=1),
    Case("policy ask answered yes passes", "write_file", WRITE, "pass", None, f"approved by {PERSON}",
         ("policy:ask", "hook:allow", "approval:approved"), hook=HookAllow(), answers=("yes",),
         events=("approval_granted",), asked=1),
    Case("a session grant approves without asking", "write_file", WRITE, "pass", None, "approved by person:earlier",
         ("policy:ask", "hook:allow", "approval:approved"), hook=HookAllow(),
         grants=(Grant("write_file", WRITE_DEFAULT_ASK, "person:earlier"),)),
    Case("a session grant approves with nobody to ask", "write_file", WRITE, "pass", None,
         "approved by person:earlier", ("policy:ask", "hook:allow", "approval:approved"), hook=HookAllow(),
         answers=None, grants=(Grant("write_file", WRITE_DEFAULT_ASK, "person:earlier"),)),
    Case("a grant for another asker is not used", "write_file", WRITE, "deny", "approval", f"rejected by {PERSON}",
         ("policy:ask", "hook:allow", "approval:rejected"), hook=HookAllow(), answers=("no",),
         grants=(Grant("write_file", "hook other (code)", "person:earlier"),), events=("approval_rejected",),
         asked=1),
    Case("a hook ask is granted by a grant for that hook", "read_file", {"path": "a.txt"}, "pass", None,
         "approved by person:earlier", ("policy:allow", "hook:ask", "approval:approved"), hook=HookAsk("really?"),
         grants=(Grant("read_file", "hook guard (code)", "person:earlier"),)),
    Case("a recorded approval for these arguments approves without asking", "write_file", WRITE, "pass", None,
         "approved by person:earlier", ("policy:ask", "hook:allow", "approval:approved"), hook=HookAllow(),
         approvals={"c1": Approval("approved", sha256_json(WRITE), "person:earlier", PLAN_DIGEST)}),
    Case("a recorded rejection for these arguments rejects without asking", "write_file", WRITE, "deny",
         "approval", "rejected by person:earlier: not this one", ("policy:ask", "hook:allow", "approval:rejected"),
         hook=HookAllow(), answers=None,
         approvals={"c1": Approval("rejected", sha256_json(WRITE), "person:earlier", PLAN_DIGEST, "not this one")}),
    Case("a recorded approval for different arguments is not used", "write_file", WRITE, "deny", "approval",
         f"rejected by {PERSON}", ("policy:ask", "hook:allow", "approval:rejected"), hook=HookAllow(),
         answers=("no",), events=("approval_rejected",), asked=1,
         approvals={"c1": Approval("approved", sha256_json({**WRITE, "path": "c.txt"}), "person:earlier",
                                   PLAN_DIGEST)}),
    Case("a recorded approval for different arguments parks again", "write_file", WRITE, "parked", None,
         "recorded for different arguments", ("policy:ask", "hook:allow", "approval:parked"), hook=HookAllow(),
         answers=None, on_ask="park",
         approvals={"c1": Approval("approved", sha256_json({**WRITE, "path": "c.txt"}), "person:earlier",
                                   PLAN_DIGEST)}),
    Case("a recorded approval under another tool plan is not used", "write_file", WRITE, "deny", "approval",
         f"rejected by {PERSON}", ("policy:ask", "hook:allow", "approval:rejected"), hook=HookAllow(),
         answers=("no",), events=("approval_rejected",), asked=1,
         approvals={"c1": Approval("approved", sha256_json(WRITE), "person:earlier", "plan_old")}),
    Case("an ask with no approver and on_ask park is parked", "write_file", WRITE, "parked", None,
         "waiting for `strata approve`", ("policy:ask", "hook:allow", "approval:parked"), hook=HookAllow(),
         answers=None, on_ask="park"),
    Case("a hook ask with nobody to ask is denied", "read_file", {"path": "a.txt"}, "deny", "hook",
         "there is no person to approve it in headless mode", ("policy:allow", "hook:ask", "approval:deny"),
         hook=HookAsk("really?"), answers=None),
    Case("a read passes every check", "read_file", {"path": "a.txt"}, "pass", None,
         "default: read tools are allowed in headless mode", ("policy:allow", "hook:allow"), hook=HookAllow()),
]


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    return workspace


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_where_a_call_stops_and_why(ws: Path, case: Case) -> None:
    """Each call stops at its deciding check with that check's reason and path, and nothing after it runs."""
    hook = PyHook(case.hook)
    approver = None if case.answers is None else StrictApprover(*case.answers)
    processor = ToolCallProcessor(BoundToolPlan(builtin_tools(), "headless"), workspace=ws, ids=IdFactory(),
                                  hooks=HookSet((hook.hook,)), approver=approver, on_ask=case.on_ask,
                                  middleware=(*DEFAULT_MIDDLEWARE, *(Route(s, t) for s, t in case.routes)))
    decision = await processor.decide(planned(case.tool, case.args),
                                      env(rules=rules(*case.rules), grants=case.grants, approvals=case.approvals))

    assert path_of(decision) == case.path, decision.steps
    match case.expect:
        case "deny":
            assert isinstance(decision.verdict, Deny), decision.verdict
            assert decision.verdict.check == case.check
            assert any(case.says in r for r in decision.verdict.reasons), decision.verdict.reasons
        case "pass":
            assert isinstance(decision.verdict, Pass), decision.verdict
            assert decision.verdict.rule is not None and case.says in decision.verdict.rule, decision.verdict
        case "parked":
            assert isinstance(decision.verdict, Parked), decision.verdict
            assert case.says in decision.steps[-1].detail
    assert tuple(e.kind for e in decision.events) == case.events  # type: ignore[union-attr]
    assert len(hook.seen) == (1 if any(p.startswith("hook:") for p in case.path) else 0)
    if approver is not None:
        assert len(approver.asked) == case.asked


async def test_approval_events_are_bound_to_the_arguments_and_plan(ws: Path) -> None:
    """A "yes, always" answer records who approved, the argument sha256, the plan digest and the asking hook."""
    hook = PyHook(HookAsk("really?"))
    processor = ToolCallProcessor(BoundToolPlan(builtin_tools(), "headless"), workspace=ws, ids=IdFactory(),
                                  hooks=HookSet((hook.hook,)), approver=StrictApprover("always"))
    decision = await processor.decide(planned("read_file", {"path": "a.txt"}), env())
    granted, grant = decision.events
    assert decision.approver == PERSON
    assert granted.model_dump(exclude={"kind"}) == {  # type: ignore[union-attr]
        "call_id": "c1", "tool": "read_file", "args_sha256": sha256_json({"path": "a.txt"}),
        "plan_digest": PLAN_DIGEST, "approver": PERSON, "scope": "session", "asked_by": "hook guard (code)"}
    assert grant.model_dump(exclude={"kind"}) == {  # type: ignore[union-attr]
        "tool": "read_file", "asked_by": "hook guard (code)", "approver": PERSON, "call_id": "c1"}


async def test_the_approver_sees_the_full_call_and_why_it_is_asked(ws: Path) -> None:
    """The approval request carries the call's arguments, their sha256, the tool's classes and every reason."""
    approver = StrictApprover("yes")
    processor = ToolCallProcessor(BoundToolPlan(builtin_tools(), "headless"), workspace=ws, ids=IdFactory(),
                                  hooks=HookSet((PyHook(HookAsk("looks odd")).hook,)), approver=approver)
    await processor.decide(planned("write_file", WRITE), env())
    (request,) = approver.asked
    assert (request.tool, dict(request.input), request.input_sha256) == ("write_file", WRITE, sha256_json(WRITE))
    assert (request.safety, request.effect, request.pii, request.plan_digest) == (
        "write", "effectful", "none", PLAN_DIGEST)
    assert request.asked_by == f"{WRITE_DEFAULT_ASK} + hook guard (code)"
    assert request.reasons == ("write_file (write, effectful) needs approval by default",
                               "hook guard (code): looks odd")


# -- the order holds for any combination of verdicts --------------------------------------------------------

STEP_INDEX = {name: i for i, name in enumerate(ORDER)}
WHY = {
    "resolve": "unknown tool 'nope'",
    "scope": "outside the workspace",
    "middleware": "rewrite of act to peek would lower the safety level from write to read",
    "policy": "denied by deny rule 'act'",
    "schema": "Additional properties are not allowed ('bogus' was unexpected)",
    "hook": "blocked by hook guard (code): no",
    "approval": f"rejected by {PERSON}",
}


@dataclass(frozen=True)
class Combo:
    resolve: Literal["known", "unknown"]
    scope: Literal["inside", "outside"]
    middleware: Literal["none", "downgrade"]
    policy: Literal["allow", "deny", "ask"]
    schema: Literal["valid", "invalid"]
    hook: Literal["allow", "block", "ask", "rewrite_outside", "rewrite_ok"]
    approval: Literal["yes", "no"]

    def expected(self) -> tuple[str | None, str]:
        """The deciding check (None: the call passes) and the step at which it stopped."""
        for step, failed in (("resolve", self.resolve == "unknown"), ("scope", self.scope == "outside"),
                             ("middleware", self.middleware == "downgrade"), ("policy", self.policy == "deny"),
                             ("schema", self.schema == "invalid"), ("hook", self.hook == "block")):
            if failed:
                return step, step
        if self.hook == "rewrite_outside":
            return "scope", "hook"  # the re-check after the rewrite refuses it
        if self.policy == "ask" or self.hook == "ask":
            return ("approval" if self.approval == "no" else None), "approval"
        return None, "hook"


combos = st.builds(
    Combo,
    resolve=st.sampled_from(("known", "unknown")),
    scope=st.sampled_from(("inside", "outside")),
    middleware=st.sampled_from(("none", "downgrade")),
    policy=st.sampled_from(("allow", "deny", "ask")),
    schema=st.sampled_from(("valid", "invalid")),
    hook=st.sampled_from(("allow", "block", "ask", "rewrite_outside", "rewrite_ok")),
    approval=st.sampled_from(("yes", "no")),
)

HOOK_VERDICTS: dict[str, Any] = {
    "allow": HookAllow(),
    "block": HookBlock("no"),
    "ask": HookAsk("sure?"),
    "rewrite_outside": lambda data: HookRewrite({**data.input, "path": "../evil.txt"}),
    "rewrite_ok": lambda data: HookRewrite({**data.input, "path": "moved.txt"}),
}


def segments_in_order(steps: tuple[Step, ...]) -> bool:
    """Within the path before a hook rewrite, and within the re-check after it, checks never go backwards."""
    last = -1
    for step in steps:
        index = STEP_INDEX[step.check]
        if index < last:
            return False
        last = STEP_INDEX["resolve"] if (step.check, step.outcome) == ("hook", "rewrite") else index
    return True


@pytest.fixture(scope="module")
def order_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("order_ws")


@settings(max_examples=60, deadline=None)
@given(combo=combos)
def test_first_failing_check_decides_and_nothing_later_runs(order_ws: Path, combo: Combo) -> None:
    """For any mix of verdicts, the deciding check is the first failing one in the fixed order, the path never
    goes backwards, and no later step (middleware, hook, approver) was consulted."""
    tools = [fake_tool("act", safety="write"), fake_tool("peek", safety="read")]
    hook = PyHook(HOOK_VERDICTS[combo.hook])
    route = Route("act" if combo.middleware == "downgrade" else "never", "peek")
    approver = StrictApprover(combo.approval)
    processor = ToolCallProcessor(BoundToolPlan(tools, "headless"), workspace=order_ws, ids=IdFactory(),
                                  hooks=HookSet((hook.hook,)), approver=approver,
                                  middleware=(*DEFAULT_MIDDLEWARE, route))
    args: dict[str, Any] = {"path": "inside.txt" if combo.scope == "inside" else "../outside.txt", "content": "x"}
    if combo.schema == "invalid":
        args["bogus"] = 1
    call = planned("act" if combo.resolve == "known" else "nope", args)
    policy = {"allow": "+act", "deny": "-act", "ask": "?act"}[combo.policy]

    decision = anyio.run(processor.decide, call, env(rules=rules(policy)))

    check, stopped_at = combo.expected()
    reached = STEP_INDEX[stopped_at]
    if check is None:
        assert isinstance(decision.verdict, Pass), (combo, decision.verdict, decision.steps)
    else:
        assert isinstance(decision.verdict, Deny), (combo, decision.verdict, decision.steps)
        assert decision.verdict.check == check, (combo, decision.verdict)
        why = "after the rewrite by hook guard (code)" if stopped_at == "hook" and check == "scope" else WHY[check]
        assert any(why in r for r in decision.verdict.reasons), (combo, decision.verdict.reasons)
        assert decision.steps[-1].check == check, (combo, decision.steps)
    assert segments_in_order(decision.steps), (combo, decision.steps)
    assert (len(route.seen) > 0) == (reached >= STEP_INDEX["middleware"]), (combo, route.seen)
    assert len(hook.seen) == (1 if reached >= STEP_INDEX["hook"] else 0), combo
    assert len(approver.asked) == (1 if stopped_at == "approval" else 0), combo


# -- approvals across one batch ------------------------------------------------------------------------------


async def test_always_covers_the_later_calls_of_the_same_batch(tmp_path: Path, ws: Path) -> None:
    """After "always for this session", the next call of the same tool and asker in the batch is not asked."""
    approver = StrictApprover("always", "no")
    plan = BoundToolPlan(builtin_tools(), "headless")
    processor = ToolCallProcessor(plan, workspace=ws, ids=IdFactory(), approver=approver)
    async with sqlite_session(tmp_path, ws, plan) as writer:
        results = await run_calls(processor, writer, [planned("write_file", WRITE, "c1"),
                                                      planned("write_file", {**WRITE, "path": "c.txt"}, "c2")])
    assert [r.status for r in results.values()] == ["ok", "ok"]
    assert len(approver.asked) == 1
