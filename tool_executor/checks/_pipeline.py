"""Steps 1-5 of a call's path as one pipeline: every check has the same signature (the call as it stands, the
context, the steps taken so far) and returns the call as it stands after it; `CHECKS` fixes their order, here
and nowhere else. The first check that denies ends the pipeline. Pure: no effects, no waiting."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from core.policy import PermissionRule
from core.record import record
from core.tools import BoundToolPlan, ToolSpec
from tool_executor._types import Checked, Step
from tool_executor.checks.policy import check_policy
from tool_executor.checks.resolve import check_resolve
from tool_executor.checks.schema import SchemaValidator, check_schema
from tool_executor.checks.scope import check_scope
from tool_executor.middleware import Middleware, downgrade
from tool_executor.paths import one_reading
from tool_executor.verdicts import Ask, Deny, Pass


@record
class CheckContext:
    """What the checks read besides the call: the session's tools and workspace, the trusted middleware, the
    schema validators, the rules (the session's and the config files'), the mode, and `unanswered`, which turns
    an `ask` nobody can answer into a denial (None: someone or something will answer it)."""

    plan: BoundToolPlan
    workspace: Path
    middleware: Sequence[Middleware]
    validators: Mapping[str, SchemaValidator]
    rules: Sequence[PermissionRule]
    mode: str
    unanswered: Callable[[Ask, str, Mapping[str, Any]], Deny | None]


_PASS = Pass()


@record
class Candidate:
    """The call as it stands: its tool (and spec, once resolved), its arguments, and the verdict so far."""

    tool: str
    input: Mapping[str, Any]
    spec: ToolSpec | None = None
    verdict: Pass | Ask | Deny = _PASS


def _deny(candidate: Candidate, steps: list[Step], deny: Deny, *, step: bool = True, by: str | None = None,
          **where: Any) -> Candidate:
    if step:
        steps.append(Step(deny.check, "deny", "; ".join(deny.reasons), by=by or deny.check))
    return replace(candidate, verdict=deny, **where)


def resolve(c: Candidate, ctx: CheckContext, steps: list[Step]) -> Candidate:
    """Step 1: the tool must be in the session's tool plan."""
    verdict = check_resolve(ctx.plan, c.tool)
    if isinstance(verdict, Deny):
        return _deny(c, steps, verdict)
    return Candidate(c.tool, c.input, ctx.plan[c.tool], c.verdict)  # not `replace`: it walks the fields per call


def scope(c: Candidate, ctx: CheckContext, steps: list[Step]) -> Candidate:
    """Step 2: path arguments resolve inside the workspace."""
    assert c.spec is not None
    verdict = check_scope(c.spec, c.input, ctx.workspace)
    return _deny(c, steps, verdict) if isinstance(verdict, Deny) else c


def middleware(c: Candidate, ctx: CheckContext, steps: list[Step]) -> Candidate:
    """Step 3: trusted rewrites; never to an unknown tool or a lower safety level or PII class. A rewritten call
    is scoped again."""
    for mw in ctx.middleware:
        assert c.spec is not None
        rewrite = mw(c.spec, c.input, ctx.workspace)
        if rewrite is None:
            continue
        steps.append(Step("middleware", "rewrite", f"{rewrite.by}: {rewrite.reason}", by=rewrite.by))
        if rewrite.tool not in ctx.plan:
            deny = Deny("middleware", (f"{rewrite.by} routed the call to unknown tool {rewrite.tool!r}",))
            return _deny(c, steps, deny, step=False)
        target = ctx.plan[rewrite.tool]
        problem = downgrade(c.spec, target)
        if problem is not None:
            steps.append(Step("middleware", "deny", problem, by=rewrite.by))
            return _deny(c, steps, Deny("middleware", (f"{rewrite.by}: {problem}",)), step=False)
        c = Candidate(rewrite.tool, dict(rewrite.input), target, c.verdict)
        c = scope(c, ctx, steps)
        if isinstance(c.verdict, Deny):
            return c
    return c


def policy(c: Candidate, ctx: CheckContext, steps: list[Step]) -> Candidate:
    """Step 4: rules over per-mode defaults. An `ask` nobody can answer is a denial right here."""
    assert c.spec is not None
    verdict = check_policy(c.spec, c.input, ctx.rules, ctx.mode, ctx.workspace)
    if isinstance(verdict, Ask):
        verdict = ctx.unanswered(verdict, c.tool, c.input) or verdict
    if isinstance(verdict, Deny):
        return _deny(c, steps, verdict)
    if isinstance(verdict, Ask):
        steps.append(Step("policy", "ask", verdict.asked_by, by=verdict.asked_by))
    else:
        steps.append(Step("policy", "allow", verdict.rule or "", by=verdict.rule or "policy"))
    return Candidate(c.tool, c.input, c.spec, verdict)


def schema(c: Candidate, ctx: CheckContext, steps: list[Step]) -> Candidate:
    """Step 5: JSON Schema, every error listed, nothing repaired."""
    verdict = check_schema(ctx.validators[c.tool], c.input)
    return _deny(c, steps, verdict) if isinstance(verdict, Deny) else c


Check = Callable[[Candidate, CheckContext, list[Step]], Candidate]

CHECKS: tuple[Check, ...] = (resolve, scope, middleware, policy, schema)
"""The order of steps 1-5."""


def run_checks(tool: str, args: Mapping[str, Any], ctx: CheckContext) -> Checked:
    """Steps 1-5 for one call: where they ended, for the (possibly rewritten) call, and the steps taken. The
    steps read each path argument through one resolution (`one_reading`)."""
    return one_reading(lambda: _run_checks(tool, args, ctx))


def _run_checks(tool: str, args: Mapping[str, Any], ctx: CheckContext) -> Checked:
    c = Candidate(tool, args)
    steps: list[Step] = []
    for check in CHECKS:
        c = check(c, ctx, steps)
        if isinstance(c.verdict, Deny):
            break
    return Checked(c.verdict, c.spec, c.tool, c.input, tuple(steps))
