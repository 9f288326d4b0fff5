"""A child's plan is its parent's narrowed (issue 14, acceptance 3), in-process over a real SQLite store and the
scripted model read from a file: a tool the parent does not have is not in the child's plan (a call of it is denied
by the plan, at `resolve`), `tools` only removes (naming a tool the parent lacks is refused), and a session at the
maximum depth (2) has no `delegate`: delegation three deep is refused."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent.lineage import children_of
from agent.models import model_from_spec
from agent.session import Asking, Runtime, resume_session, start_session
from core.clock import SystemClock
from core.events import CallResult, GrantAdded, Mode
from core.ids import IdFactory
from core.policy import parse_rule
from core.tools import ToolSpec
from memory import EventStore, SqliteEventStore
from memory.restore import restore
from tool_executor import Approver, builtin_tools
from tool_executor.approval import ApprovalAnswer, ApprovalRequest
from tool_executor.verdicts import Parked

pytestmark = pytest.mark.anyio


_OPEN: list[EventStore] = []


@pytest.fixture(autouse=True)
async def _close_stores() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().close()


def _use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def _say(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


async def _run(tmp_path: Path, script: dict[str, Any], tools: list[ToolSpec] | None = None, *,
               mode: Mode = "headless", in_daemon: bool = False, approver: Approver | None = None,
               allow: tuple[str, ...] = ("delegate", "bash", "write_file"),
               pass_grants: bool = False) -> tuple[EventStore, str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    _OPEN.append(store)
    rt = Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=tools or builtin_tools(),
                 delegate_in_daemon=in_daemon, delegate_grants=pass_grants)
    rules = [parse_rule("allow", name) for name in allow]
    live = await start_session(rt, model=model_from_spec(f"script:{path}"), workspace=ws, mode=mode,
                               rules=rules, prompt="go", max_turns=10, asking=Asking(approver=approver))
    await live.run()
    await live.release(None)
    return store, live.id


async def _results(store: EventStore, session_id: str) -> dict[str, CallResult]:
    return {e.event.call_id: e.event for e in await store.read_events(session_id) if isinstance(e.event, CallResult)}


async def _only_child(store: EventStore, parent_id: str) -> str:
    (child,) = await children_of(store, parent_id)
    return child.id


async def test_a_tool_the_parent_lacks_is_denied_to_the_child_by_the_plan(tmp_path: Path) -> None:
    no_bash = [t for t in builtin_tools() if t.name != "bash"]
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="run a command")], [_say("done")]],
        "children": [[[_use("c1", "bash", command="echo hi > x.txt")], [_say("could not")]]],
    }, tools=no_bash)
    child = await _only_child(store, parent)
    denied = (await _results(store, child))["c1"]
    assert denied.status == "denied" and denied.check == "resolve", denied
    assert not (tmp_path / "ws" / "x.txt").exists()
    assert "could not" in (await _results(store, parent))["p1"].content


async def test_tools_only_removes_and_a_tool_the_parent_lacks_is_refused(tmp_path: Path) -> None:
    no_bash = [t for t in builtin_tools() if t.name != "bash"]
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="a", tools=["bash"]),
                   _use("p2", "delegate", task="b", tools=["read_file"])], [_say("done")]],
        "children": [[[_use("c1", "write_file", path="w.txt", content="no")], [_say("child b")]]],
    }, tools=no_bash)
    results = await _results(store, parent)
    assert results["p1"].is_error and "it has no bash" in results["p1"].content, results["p1"]
    child = await _only_child(store, parent)  # the refused delegation started no child
    denied = (await _results(store, child))["c1"]
    assert denied.status == "denied" and denied.check == "resolve", denied
    assert not (tmp_path / "ws" / "w.txt").exists()


async def test_a_tool_only_the_parents_process_has_is_not_passed_down(tmp_path: Path) -> None:
    """A tool marked `passed_down=False` (a channel's `reply`: only the daemon has it) is left out of a child's
    tools by default, so `strata resume CHILD` elsewhere builds the plan the child's approvals are bound to; a
    delegate call naming it is refused and starts no child."""
    own = dataclasses.replace(next(t for t in builtin_tools() if t.name == "list_dir"), name="reply",
                              passed_down=False)
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="a", tools=["reply", "read_file"]),
                   _use("p2", "delegate", task="b")], [_say("done")]],
        "children": [[[_say("child b")]]],
    }, tools=[*builtin_tools(), own])
    results = await _results(store, parent)
    assert results["p1"].is_error and "a child cannot get reply" in results["p1"].content, results["p1"]
    child = await _only_child(store, parent)  # the refused delegation started no child
    allowed = (await restore(store, child)).state.tools_allowed
    assert allowed is not None and "reply" not in allowed and "read_file" in allowed, allowed


async def test_a_child_asking_for_more_turns_than_its_parents_limit_is_refused_and_one_within_it_gets_them(
        tmp_path: Path) -> None:
    """The parent runs with max_turns 10: a delegate call asking for 11 (or the schema's 1000) is refused as a tool
    the parent lacks is, naming both limits, and starts no child; one asking for 10 or fewer gets what it asked
    for, and one asking for nothing gets the parent's limit."""
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="a", max_turns=11), _use("p2", "delegate", task="b", max_turns=1000),
                   _use("p3", "delegate", task="c", max_turns=10), _use("p4", "delegate", task="d", max_turns=3),
                   _use("p5", "delegate", task="e")], [_say("done")]],
        "children": [[[_say("child c")]], [[_say("child d")]], [[_say("child e")]]],
    })
    results = await _results(store, parent)
    for call_id, asked in (("p1", 11), ("p2", 1000)):
        refused = results[call_id]
        assert refused.is_error and f"max_turns {asked} is over its 10" in refused.content, refused
    children = await children_of(store, parent)
    limits = sorted([(await restore(store, child.id)).state.max_turns for child in children])
    assert limits == [3, 10, 10], limits  # the refused calls started no child
    assert all(not results[c].is_error for c in ("p3", "p4", "p5")), results


async def test_delegation_three_deep_is_refused(tmp_path: Path) -> None:
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="level 1")], [_say("top done")]],
        "children": [{
            "turns": [[_use("c1", "delegate", task="level 2")], [_say("level 1 done")]],
            "children": [[[_use("g1", "delegate", task="level 3")], [_say("level 2 done")]]],
        }],
    })
    child = await _only_child(store, parent)
    grandchild = await _only_child(store, child)
    refused = (await _results(store, grandchild))["g1"]
    assert refused.status == "denied" and refused.check == "resolve", refused
    assert await children_of(store, grandchild) == []
    assert "level 2 done" in (await _results(store, child))["c1"].content
    assert "level 1 done" in (await _results(store, parent))["p1"].content


@pytest.mark.parametrize("in_daemon", [False, True])
async def test_daemon_mode_offers_delegate_only_when_the_setting_enables_it(tmp_path: Path, in_daemon: bool) -> None:
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="something")], [_say("done")]],
        "children": [[[_say("child done")]]],
    }, mode="daemon", in_daemon=in_daemon)
    result = (await _results(store, parent))["p1"]
    if in_daemon:
        assert result.status == "ok" and "child done" in result.content, result
        assert (await store.get_session(await _only_child(store, parent))).mode == "daemon"
    else:
        assert result.status == "denied" and result.check == "resolve", result
        assert await children_of(store, parent) == []


class _Person:
    """An approver that says yes and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        self.asked.append(request)
        return ApprovalAnswer(decision="yes", approver="person:test")


async def test_a_childs_approvals_reach_the_parents_approver_naming_the_child(tmp_path: Path) -> None:
    person = _Person()
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="write it")], [_say("done")]],
        "children": [[[_use("c1", "write_file", path="w.txt", content="x")], [_say("child wrote")]]],
    }, mode="interactive", approver=person, allow=())
    child = await _only_child(store, parent)
    assert [(r.session_id, r.tool) for r in person.asked] == [(parent, "delegate"), (child, "write_file")]
    assert f"in child session {child} delegated by {parent}" in person.asked[1].reasons
    assert (tmp_path / "ws" / "w.txt").read_text() == "x"


async def test_a_headless_childs_ask_follows_the_parents_on_ask(tmp_path: Path) -> None:
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "delegate", task="write it")], [_say("done")]],
        "children": [[[_use("c1", "write_file", path="w.txt", content="x")], [_say("child denied")]]],
    }, allow=("delegate",))  # headless, on_ask deny: the child's write is asked, so denied
    child = await _only_child(store, parent)
    denied = (await _results(store, child))["c1"]
    assert denied.status == "denied" and denied.check == "policy", denied
    assert not (tmp_path / "ws" / "w.txt").exists()


class _AlwaysPerson(_Person):
    """An approver that answers "always" and keeps what it was asked."""

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        self.asked.append(request)
        return ApprovalAnswer(decision="always", approver="person:test")


@pytest.mark.parametrize("pass_grants", [False, True])
async def test_a_parents_always_grants_pass_to_the_child_only_when_configured(tmp_path: Path,
                                                                              pass_grants: bool) -> None:
    person = _AlwaysPerson()
    store, parent = await _run(tmp_path, {
        "turns": [[_use("p1", "write_file", path="p.txt", content="p")], [_use("p2", "delegate", task="write")],
                  [_say("done")]],
        "children": [[[_use("c1", "write_file", path="c.txt", content="c")], [_say("child wrote")]]],
    }, mode="interactive", approver=person, allow=(), pass_grants=pass_grants)
    child = await _only_child(store, parent)
    asked = [(r.session_id, r.tool) for r in person.asked]
    if pass_grants:  # the parent's "always" for write_file holds in the child, recorded there as passed down
        assert asked == [(parent, "write_file"), (parent, "delegate")]
        grants = [e.event for e in await store.read_events(child) if isinstance(e.event, GrantAdded)]
        assert [(g.tool, g.call_id) for g in grants] == [("write_file", "p2"), ("delegate", "p2")]
        assert all(g.approver == f"person:test, passed down from session {parent}" for g in grants)
    else:  # by default the child asks again
        assert asked == [(parent, "write_file"), (parent, "delegate"), (child, "write_file")]
    assert (tmp_path / "ws" / "c.txt").read_text() == "c"


@pytest.mark.parametrize("pass_grants", [False, True])
async def test_a_resumed_parent_passes_its_always_grants_down_only_when_configured(tmp_path: Path,
                                                                                   pass_grants: bool) -> None:
    """The setting holds for a parent that delegates after a resume as it does before one."""
    person = _AlwaysPerson()
    path = tmp_path / "script.json"
    path.write_text(json.dumps({
        "turns": [[_use("p1", "write_file", path="p.txt", content="p")], [_use("p2", "delegate", task="write")],
                  [_say("done")]],
        "children": [[[_use("c1", "write_file", path="c.txt", content="c")], [_say("child wrote")]]],
    }), encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    store = await SqliteEventStore.open(tmp_path / "strata.db")
    _OPEN.append(store)
    rt = Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=builtin_tools(), delegate_grants=pass_grants)
    first = await start_session(rt, model=model_from_spec(f"script:{path}"), workspace=ws, mode="interactive",
                                rules=[], prompt="go", max_turns=1, asking=Asking(approver=person))
    await first.run()  # one turn: the write, granted "always"; the session stops at its turn limit
    await first.release(None)
    assert await children_of(store, first.id) == []
    resumed = await resume_session(rt, first.id, rules=[], model_factory=model_from_spec, max_turns=10,
                                   asking=Asking(approver=person))
    await resumed.run()
    await resumed.release(None)
    child = await _only_child(store, first.id)
    asked = [(r.session_id, r.tool) for r in person.asked]
    if pass_grants:
        assert asked == [(first.id, "write_file"), (first.id, "delegate")]
    else:
        assert asked == [(first.id, "write_file"), (first.id, "delegate"), (child, "write_file")]
    assert (ws / "c.txt").read_text() == "c"
