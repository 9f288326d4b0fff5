"""Step 3, request middleware, both ways: the built-in path normalisation rewrites spellings but repairs nothing,
and a routing middleware may move a call up (the later checks then judge the new call) but never down."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from core.ids import IdFactory
from core.tools import BoundToolPlan, ToolSpec
from tests.tool_executor._pipeline import Route, env, fake_tool, planned, rules, run_calls, sqlite_session
from tool_executor import DEFAULT_MIDDLEWARE, Checked, Deny, Middleware, Pass, Step, ToolCallProcessor, builtin_tools

NORMALISE = "middleware:normalise_paths"


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "b.txt").write_text("bravo\n")
    return workspace


def processor(ws: Path, tools: Sequence[ToolSpec] | None = None,
              middleware: Sequence[Middleware] = DEFAULT_MIDDLEWARE) -> ToolCallProcessor:
    plan = BoundToolPlan(builtin_tools() if tools is None else tools, "headless")
    return ToolCallProcessor(plan, workspace=ws, ids=IdFactory(), middleware=middleware)


def check(p: ToolCallProcessor, tool: str, args: Mapping[str, Any], *specs: str) -> Checked:
    return p.check(tool, args, rules(*specs), "headless")


def deny_reasons(checked: Checked, check_name: str) -> tuple[str, ...]:
    assert isinstance(checked.verdict, Deny), checked.verdict
    assert checked.verdict.check == check_name, checked.verdict
    return checked.verdict.reasons


# -- built-in path normalisation ---------------------------------------------------------------------------


def test_dot_dot_path_is_normalised_and_the_call_passes(ws: Path) -> None:
    """`./a/../b.txt` becomes `b.txt`, the rewrite is on the path, and the read passes."""
    checked = check(processor(ws), "read_file", {"path": "./a/../b.txt"})
    assert isinstance(checked.verdict, Pass)
    assert (checked.tool, dict(checked.input)) == ("read_file", {"path": "b.txt"})
    assert checked.steps[0] == Step("middleware", "rewrite",
                                    f"{NORMALISE}: paths normalised (path: './a/../b.txt' -> 'b.txt')", by=NORMALISE)


def test_absolute_path_inside_the_workspace_becomes_relative(ws: Path) -> None:
    """An absolute path into the workspace is spelled workspace-relative for rules and the handler."""
    checked = check(processor(ws), "read_file", {"path": str(ws / "b.txt")})
    assert isinstance(checked.verdict, Pass)
    assert dict(checked.input) == {"path": "b.txt"}


def test_a_path_already_normal_is_not_rewritten(ws: Path) -> None:
    """A path already in its normal form leaves no middleware step on the path."""
    checked = check(processor(ws), "read_file", {"path": "b.txt"})
    assert [s.check for s in checked.steps] == ["policy"]


async def test_the_handler_gets_the_normalised_path(tmp_path: Path, ws: Path) -> None:
    """The normalised arguments are what the handler receives, not the model's spelling."""
    calls: list[tuple[str, dict[str, Any]]] = []
    p = processor(ws, [fake_tool("note", safety="write", calls=calls)])
    async with sqlite_session(tmp_path, ws, p.plan) as writer:
        results = await run_calls(p, writer, [planned("note", {"path": "./x/../b.txt", "content": "c"})],
                                  env(rules=rules("+note")))
    assert results["c1"].status == "ok"
    assert calls == [("note", {"path": "b.txt", "content": "c"})]


@pytest.mark.parametrize(("args", "says"), [
    ({"path": ""}, "path: '' should be non-empty"),
    ({"path": 7}, "path: 7 is not of type 'string'"),
    ({}, "(arguments): 'path' is a required property"),
])
def test_normalisation_repairs_nothing(ws: Path, args: dict[str, Any], says: str) -> None:
    """An empty, mistyped or missing path is not "fixed" by normalisation: the schema check still denies it."""
    checked = check(processor(ws), "read_file", args)
    assert says in deny_reasons(checked, "schema")
    assert dict(checked.input) == args
    assert not any(s.check == "middleware" for s in checked.steps)


# -- routing middleware --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target", "says"), [
    ("act", "peek", "rewrite of act to peek would lower the safety level from write to read"),
    ("vault", "plain", "rewrite of vault to plain would lower the PII class from sensitive to none"),
    ("vault_act", "peek", "rewrite of vault_act to peek would lower the safety level from write to read and the "
                          "PII class from sensitive to none"),
])
def test_routing_down_is_rejected_with_a_reason(ws: Path, source: str, target: str, says: str) -> None:
    """A route to a tool with a lower safety level or PII class is denied by the middleware check, naming both."""
    tools = [fake_tool("act", safety="write"), fake_tool("peek", safety="read"),
             fake_tool("vault", safety="read", pii="sensitive"), fake_tool("plain", safety="read"),
             fake_tool("vault_act", safety="write", pii="sensitive")]
    checked = check(processor(ws, tools, [Route(source, target)]), source, {"path": "b.txt"}, "+*")
    assert deny_reasons(checked, "middleware") == (f"middleware:route: {says}",)
    assert checked.steps == (Step("middleware", "rewrite", f"middleware:route: routed {source} to {target}",
                                  by="middleware:route"),
                             Step("middleware", "deny", says, by="middleware:route"))
    assert checked.tool == source


def test_routing_to_an_unknown_tool_is_rejected(ws: Path) -> None:
    """A route to a tool outside the session's plan is denied by the middleware check."""
    checked = check(processor(ws, [fake_tool("peek", safety="read")], [Route("peek", "ghost")]), "peek",
                    {"path": "b.txt"})
    assert deny_reasons(checked, "middleware") == ("middleware:route routed the call to unknown tool 'ghost'",)


@pytest.mark.parametrize(("source", "target"), [("peek", "act"), ("peek", "glance"), ("plain", "vault")],
                         ids=["higher-safety", "equal", "higher-pii"])
def test_routing_up_or_level_passes_as_the_new_tool(ws: Path, source: str, target: str) -> None:
    """A route to an equal or higher level passes, and the call that comes out is the new tool's."""
    tools = [fake_tool("peek", safety="read"), fake_tool("glance", safety="read"), fake_tool("act", safety="write"),
             fake_tool("plain", safety="read"), fake_tool("vault", safety="read", pii="sensitive")]
    route = Route(source, target, lambda a: {"path": "routed.txt"})
    checked = check(processor(ws, tools, [route]), source, {"path": "b.txt"}, f"+{target}")
    assert checked.verdict == Pass(rule=f"allow rule {target!r} (flag)")
    assert (checked.tool, dict(checked.input)) == (target, {"path": "routed.txt"})
    assert checked.spec is not None and checked.spec.name == target


@pytest.mark.parametrize(("new_args", "rule", "check_name", "says"), [
    ({"path": "../out.txt"}, "+act", "scope", "outside the workspace"),
    ({"path": "b.txt"}, "-act", "policy", "denied by deny rule 'act'"),
    ({"path": "b.txt"}, "+peek", "policy", "act (write, effectful) needs approval by default"),
    ({"path": "b.txt", "bogus": 1}, "+act", "schema", "('bogus' was unexpected)"),
], ids=["scope", "deny-rule", "default-ask", "schema"])
def test_later_checks_judge_the_routed_call(ws: Path, new_args: dict[str, Any], rule: str, check_name: str,
                                            says: str) -> None:
    """After routing peek to act, scope, policy and schema run on act and its new arguments, not on peek's."""
    tools = [fake_tool("peek", safety="read"), fake_tool("act", safety="write")]
    checked = check(processor(ws, tools, [Route("peek", "act", lambda a: new_args)]), "peek", {"path": "b.txt"},
                    rule)
    assert any(says in r for r in deny_reasons(checked, check_name))


async def test_a_routed_call_runs_the_new_tools_handler(tmp_path: Path, ws: Path) -> None:
    """The handler that runs is the routed tool's, with the routed arguments; the original tool never runs."""
    calls: list[tuple[str, dict[str, Any]]] = []
    tools = [fake_tool("peek", safety="read", calls=calls), fake_tool("act", safety="write", calls=calls)]
    p = processor(ws, tools, [Route("peek", "act", lambda a: {**a, "content": "routed"})])
    async with sqlite_session(tmp_path, ws, p.plan) as writer:
        results = await run_calls(p, writer, [planned("peek", {"path": "b.txt"})], env(rules=rules("+act")))
    assert results["c1"].status == "ok"
    assert calls == [("act", {"path": "b.txt", "content": "routed"})]


def test_middleware_sees_the_previous_rewrite(ws: Path) -> None:
    """Middleware runs in order; a later one is given the tool and arguments the earlier one produced."""
    later = Route("never", "peek")
    tools = [fake_tool("peek", safety="read"), fake_tool("act", safety="write")]
    check(processor(ws, tools, [*DEFAULT_MIDDLEWARE, Route("peek", "act"), later]), "peek", {"path": "./b.txt"})
    assert later.seen == [("act", {"path": "b.txt"})]


@pytest.mark.parametrize(("tool", "args"), [("ghost", {"path": "b.txt"}), ("peek", {"path": "../out.txt"})],
                         ids=["resolve", "scope"])
def test_middleware_is_not_called_after_an_earlier_denial(ws: Path, tool: str, args: dict[str, Any]) -> None:
    """A call denied by resolve or scope never reaches the middleware."""
    route = Route("peek", "act")
    checked = check(processor(ws, [fake_tool("peek", safety="read"), fake_tool("act", safety="write")], [route]),
                    tool, args)
    assert isinstance(checked.verdict, Deny)
    assert route.seen == []
