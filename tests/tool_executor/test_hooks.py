"""PreToolUse and PostToolUse hooks: rewrites are re-checked, failures fail closed, and command hooks (real bash
scripts answering JSON) work end to end through `run_batch` over a real SQLite session."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from agent.testing import PyHook, StrictApprover
from core.events import ApprovalGranted
from core.hooks import (
    Hook,
    HookAddContext,
    HookAllow,
    HookAsk,
    HookBlock,
    HookRewrite,
    HookSet,
    HookWithhold,
    PreToolUseInput,
)
from core.ids import IdFactory
from core.tools import BoundToolPlan
from memory.session_writer import SessionWriter
from tests.tool_executor._pipeline import (
    SESSION,
    command_hook,
    env,
    planned,
    rules,
    run_calls,
    script,
    sqlite_session,
    wait_gone,
)
from tool_executor import Deny, Pass, ToolCallProcessor, builtin_tools
from tool_executor.approval import Approver

PLAN = BoundToolPlan(builtin_tools(), "headless")
WRITE = {"path": "notes.txt", "content": "hello"}


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    return workspace


def processor(ws: Path, *hooks: Hook, approver: Approver | None = None) -> ToolCallProcessor:
    return ToolCallProcessor(PLAN, workspace=ws, ids=IdFactory(), hooks=HookSet(hooks), approver=approver)


@pytest.fixture
async def writer(tmp_path: Path, ws: Path) -> AsyncIterator[SessionWriter]:
    async with sqlite_session(tmp_path, ws, PLAN) as w:
        yield w


def denial(decision_verdict: object, check: str) -> str:
    assert isinstance(decision_verdict, Deny), decision_verdict
    assert decision_verdict.check == check, decision_verdict
    return " | ".join(decision_verdict.reasons)


# -- PreToolUse rewrites are checked again ------------------------------------------------------------------


async def test_rewrite_out_of_the_workspace_is_denied_by_scope_naming_the_hook(ws: Path) -> None:
    """A hook that moves write_file's path outside the workspace is refused by the scope re-check."""
    hook = PyHook(lambda d: HookRewrite({**d.input, "path": "../escape.txt"}, reason="tidy"), name="mover")
    decision = await processor(ws, hook.hook).decide(planned("write_file", WRITE), env(rules=rules("+write_file")))
    why = denial(decision.verdict, "scope")
    assert why.startswith("after the rewrite by hook mover (code): path: path '../escape.txt' resolves to ")
    assert "outside the workspace" in why
    assert [(s.check, s.outcome) for s in decision.steps] == [("policy", "allow"), ("hook", "rewrite"),
                                                              ("scope", "deny")]
    assert decision.steps[-1].detail.startswith("after rewrite by mover: ")
    assert not (ws.parent / "escape.txt").exists()


async def test_rewrite_to_a_lower_safety_tool_is_rejected(ws: Path) -> None:
    """A hook may not turn bash (execute) into read_file (read): that would skip what bash's policy required."""
    hook = PyHook(HookRewrite({"path": "a.txt"}, tool="read_file"), name="router")
    decision = await processor(ws, hook.hook).decide(planned("bash", {"command": "cat a.txt"}),
                                                     env(rules=rules("+bash")))
    why = denial(decision.verdict, "hook")
    assert why == ("hook router (code): rewrite of bash to read_file would lower the safety level from execute "
                   "to read")
    assert [(s.check, s.outcome) for s in decision.steps][-2:] == [("hook", "rewrite"), ("hook", "deny")]
    assert "(tool bash -> read_file)" in decision.steps[-2].detail


async def test_rewrite_to_a_higher_tool_is_checked_as_that_tool(ws: Path) -> None:
    """After a rewrite to write_file, policy runs for write_file: with nobody to ask, its default ask denies."""
    hook = PyHook(HookRewrite({"path": "a.txt", "content": "x"}, tool="write_file"))
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    why = denial(decision.verdict, "policy")
    assert "after the rewrite by hook guard (code): write_file (write, effectful) needs approval by default" in why
    assert "--on-ask park" in why


async def test_rewrite_that_keeps_an_ask_still_needs_approval(ws: Path) -> None:
    """A rewrite replaces the arguments, not the need to ask: the approver is asked about the new arguments."""
    approver = StrictApprover("yes")
    hook = PyHook(lambda d: HookRewrite({**d.input, "path": "other.txt"}))
    decision = await processor(ws, hook.hook, approver=approver).decide(planned("write_file", WRITE), env())
    assert isinstance(decision.verdict, Pass)
    (request,) = approver.asked
    assert dict(request.input) == {**WRITE, "path": "other.txt"}
    assert dict(decision.input) == {**WRITE, "path": "other.txt"}


async def test_rewrite_to_an_unknown_tool_is_denied_by_resolve(ws: Path) -> None:
    """A rewrite naming a tool the session does not have is refused by the resolve re-check."""
    hook = PyHook(HookRewrite({"path": "a.txt"}, tool="teleport"))
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    assert "unknown tool 'teleport'" in denial(decision.verdict, "resolve")


async def test_a_later_hook_sees_the_rewritten_call(ws: Path) -> None:
    """Hooks run in order, and each one is given the call as the hooks before it left it."""
    first = PyHook(HookRewrite({"path": "sub.txt"}), name="first")
    second = PyHook(HookAllow(), name="second")
    await processor(ws, first.hook, second.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    (seen,) = second.seen
    assert dict(seen.input) == {"path": "sub.txt"}


async def test_hooks_guarding_the_new_tool_run_after_a_tool_rewrite(ws: Path) -> None:
    """A call rewritten into write_file still meets the hooks that guard write_file."""
    router = PyHook(HookRewrite({"path": "a.txt", "content": "x"}, tool="write_file"), name="router",
                    matcher="read_file")
    guard = PyHook(HookBlock("no writes"), name="guard", matcher="write_file")
    decision = await processor(ws, router.hook, guard.hook).decide(planned("read_file", {"path": "a.txt"}),
                                                                   env(rules=rules("+write_file")))
    assert "no writes" in denial(decision.verdict, "hook")


async def test_a_pass_after_a_rewrite_names_the_rule_that_allowed_the_new_call(ws: Path) -> None:
    """The Pass of a rewritten call names the rule that allowed the rewritten call."""
    hook = PyHook(HookRewrite({"path": "a.txt", "content": "x"}, tool="write_file"))
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}),
                                                     env(rules=rules("+write_file")))
    assert decision.verdict == Pass(rule="allow rule 'write_file' (flag)")


# -- PreToolUse: what a hook is given, and which hooks run --------------------------------------------------


async def test_a_hook_gets_one_input_object_describing_the_call(ws: Path) -> None:
    """A PreToolUse hook receives the session, call, mode, workspace, tool, arguments and the tool's classes."""
    hook = PyHook(HookAllow())
    await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}, call_id="toolu_9"), env())
    assert hook.seen == [PreToolUseInput(session_id=SESSION, call_id="toolu_9", turn=1, mode="headless",
                                         workspace=str(ws), tool="read_file", input={"path": "a.txt"},
                                         safety="read", effect="read_only")]


async def test_a_hook_runs_only_for_tools_its_matcher_names(ws: Path) -> None:
    """A hook whose matcher is `write_*` is not consulted for read_file."""
    hook = PyHook(HookBlock("no writes"), matcher="write_*")
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    assert isinstance(decision.verdict, Pass)
    assert hook.seen == []


async def test_the_first_block_stops_the_hooks_after_it(ws: Path) -> None:
    """Once a hook blocks, later hooks are not called."""
    first = PyHook(HookBlock("stop"), name="first")
    second = PyHook(HookAllow(), name="second")
    decision = await processor(ws, first.hook, second.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    assert denial(decision.verdict, "hook") == "blocked by hook first (code): stop"
    assert second.seen == []


async def test_a_hook_allow_does_not_waive_a_policy_ask(ws: Path) -> None:
    """HookAllow is "no objection": write_file's default ask still goes to the approver."""
    approver = StrictApprover("no")
    decision = await processor(ws, PyHook(HookAllow()).hook, approver=approver).decide(
        planned("write_file", WRITE), env())
    denial(decision.verdict, "approval")
    assert len(approver.asked) == 1


# -- PreToolUse: Python hooks fail closed -------------------------------------------------------------------


async def test_a_python_hook_that_raises_blocks_the_call(ws: Path) -> None:
    """A crashing hook is a block that says it crashed and how."""

    def boom(data: object) -> object:
        raise RuntimeError("boom")

    decision = await processor(ws, PyHook(boom).hook).decide(planned("read_file", {"path": "a.txt"}), env())
    assert denial(decision.verdict, "hook") == (
        "blocked by hook guard (code): hook guard (code) failed, so the call is blocked (fail closed): "
        "crashed (RuntimeError: boom)")


async def test_a_python_hook_past_its_timeout_blocks_the_call(ws: Path) -> None:
    """A hook that does not answer within timeout_s is a block that says it timed out, and the wait is bounded."""

    async def slow(data: object) -> HookAllow:
        await anyio.sleep(30)
        return HookAllow()

    started = time.monotonic()
    decision = await processor(ws, Hook("slow", "pre_tool_use", fn=slow, timeout_s=0.3)).decide(
        planned("read_file", {"path": "a.txt"}), env())
    assert time.monotonic() - started < 5
    assert "hook slow (code) failed, so the call is blocked (fail closed): timed out after 0.3 s" in denial(
        decision.verdict, "hook")


async def test_a_python_hook_answering_a_non_verdict_blocks_the_call(ws: Path) -> None:
    """A hook that returns something other than a PreToolUse verdict (here a PostToolUse one) blocks the call."""
    decision = await processor(ws, PyHook(HookWithhold("wrong event")).hook).decide(
        planned("read_file", {"path": "a.txt"}), env())
    assert "returned HookWithhold, not a verdict" in denial(decision.verdict, "hook")


async def test_a_python_hook_rewriting_to_a_non_object_blocks_the_call(ws: Path) -> None:
    """A malformed rewrite (arguments that are not an object) fails closed as a block, like a command hook's."""
    hook = PyHook(HookRewrite(["not", "an", "object"]))  # type: ignore[arg-type]
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    assert "failed, so the call is blocked" in denial(decision.verdict, "hook")


async def test_a_hook_ask_with_nobody_to_ask_does_not_suggest_an_allow_rule(ws: Path) -> None:
    """When a hook asks and there is no person, the denial must not claim that `--allow TOOL` would help."""
    hook = PyHook(HookAsk("a person must look"))
    decision = await processor(ws, hook.hook).decide(planned("read_file", {"path": "a.txt"}), env())
    why = denial(decision.verdict, "hook")
    assert "--on-ask park" in why
    assert "--allow read_file" not in why


# -- PreToolUse: command hooks end to end -------------------------------------------------------------------


async def test_command_hook_block_denies_and_runs_nothing(tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """A shell hook answering block turns the call into a denial result that names the hook and its reason."""
    path = script(tmp_path, "block.sh", """
        cat >/dev/null
        echo '{"decision": "block", "reason": "no writes on Fridays"}'
    """)
    results = await run_calls(processor(ws, command_hook(path)), writer, [planned("write_file", WRITE)],
                              env(rules=rules("+write_file")))
    result = results["c1"]
    assert (result.status, result.check, result.is_error) == ("denied", "hook", True)
    assert result.reasons == ("blocked by hook cmd (test-config): no writes on Fridays",)
    assert "no effect started" in result.content
    assert not (ws / "notes.txt").exists()


async def test_command_hook_gets_the_call_as_one_json_object(tmp_path: Path, ws: Path,
                                                              writer: SessionWriter) -> None:
    """The hook's stdin is one JSON object: the event name and every field of the hook input."""
    seen = tmp_path / "stdin.json"
    path = script(tmp_path, "tee.sh", f"cat > {seen}\n")
    await run_calls(processor(ws, command_hook(path)), writer, [planned("read_file", {"path": "a.txt"})])
    assert json.loads(seen.read_text()) == {
        "hook": "PreToolUse", "session_id": SESSION, "call_id": "c1", "turn": 1, "mode": "headless",
        "workspace": str(ws), "tool": "read_file", "input": {"path": "a.txt"}, "safety": "read",
        "effect": "read_only"}


async def test_command_hook_rewrite_reaches_the_handler(tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """A shell hook that parses its input and answers a rewrite: the handler writes the rewritten path and text."""
    path = script(tmp_path, "rewrite.sh", """
        python3 -c '
        import json, sys
        call = json.load(sys.stdin)
        args = dict(call["input"], path="rewritten.txt", content=call["input"]["content"].upper())
        print(json.dumps({"decision": "rewrite", "input": args, "reason": "house style"}))
        '
    """)
    results = await run_calls(processor(ws, command_hook(path)), writer, [planned("write_file", WRITE)],
                              env(rules=rules("+write_file")))
    assert (results["c1"].status, results["c1"].content) == ("ok", "wrote 5 bytes to rewritten.txt")
    assert (ws / "rewritten.txt").read_text() == "HELLO"
    assert not (ws / "notes.txt").exists()


async def test_command_hook_ask_goes_to_the_approver(tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """A shell hook answering ask makes the approver decide; a yes runs the call and records the approval."""
    path = script(tmp_path, "ask.sh", """
        cat >/dev/null
        echo '{"decision": "ask", "reason": "reads of a.txt are audited"}'
    """)
    approver = StrictApprover("yes")
    results = await run_calls(processor(ws, command_hook(path), approver=approver), writer,
                              [planned("read_file", {"path": "a.txt"})])
    assert (results["c1"].status, results["c1"].content) == ("ok", "alpha\n")
    (request,) = approver.asked
    assert request.reasons == ("hook cmd (test-config): reads of a.txt are audited",)
    stored = [e.event for e in await writer.store.read_events(SESSION) if isinstance(e.event, ApprovalGranted)]
    assert [(g.call_id, g.asked_by) for g in stored] == [("c1", "hook cmd (test-config)")]


async def test_command_hook_with_empty_output_allows(tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """Exit status 0 with nothing on stdout is "no opinion": the call runs."""
    path = script(tmp_path, "quiet.sh", "cat >/dev/null\n")
    results = await run_calls(processor(ws, command_hook(path)), writer, [planned("read_file", {"path": "a.txt"})])
    assert (results["c1"].status, results["c1"].content) == ("ok", "alpha\n")


@pytest.mark.parametrize(("body", "says"), [
    ("cat >/dev/null\necho '{\"decision\": \"allow\"'\n", "answered malformed JSON"),
    ("cat >/dev/null\necho '[\"allow\"]'\n", "answered JSON that is not an object"),
    ("cat >/dev/null\necho '{\"decision\": \"maybe\"}'\n", "unknown decision 'maybe'"),
    ("cat >/dev/null\necho '{\"decision\": \"block\"}'\n", "answer needs a non-empty string 'reason'"),
    ("cat >/dev/null\necho '{\"decision\": \"rewrite\", \"input\": [1]}'\n", "a rewrite needs an 'input' object"),
    ("cat >/dev/null\necho 'policy engine down' >&2\nexit 3\n", "exited with status 3: policy engine down"),
], ids=["malformed-json", "not-an-object", "unknown-decision", "block-without-reason", "rewrite-without-object",
        "non-zero-exit"])
async def test_command_hook_failure_blocks(tmp_path: Path, ws: Path, writer: SessionWriter, body: str,
                                           says: str) -> None:
    """A shell hook that answers something malformed or exits non-zero blocks the call and says why."""
    path = script(tmp_path, "bad.sh", body)
    results = await run_calls(processor(ws, command_hook(path)), writer, [planned("read_file", {"path": "a.txt"})])
    result = results["c1"]
    assert (result.status, result.check) == ("denied", "hook")
    (reason,) = result.reasons
    assert "hook cmd (test-config) failed, so the call is blocked (fail closed): " in reason
    assert says in reason


async def test_command_hook_timeout_blocks_and_kills_its_process_group(tmp_path: Path, ws: Path,
                                                                       writer: SessionWriter) -> None:
    """A shell hook past its timeout blocks the call, and the children it left running are killed with it."""
    pid_file = tmp_path / "child.pid"
    path = script(tmp_path, "hang.sh", f"""
        cat >/dev/null
        sleep 30 &
        echo $! > {pid_file}
        wait
    """)
    started = time.monotonic()
    results = await run_calls(processor(ws, command_hook(path, timeout_s=1.0)), writer,
                              [planned("read_file", {"path": "a.txt"})])
    assert time.monotonic() - started < 10
    result = results["c1"]
    assert (result.status, result.check) == ("denied", "hook")
    assert "timed out after 1 s (its process group was killed)" in result.reasons[0]
    child = int(pid_file.read_text())
    assert await wait_gone(child), f"the hook's background child {child} is still running"


async def test_a_command_hook_gets_no_descriptor_of_its_watchdog_and_waits_only_for_its_own_children(
        tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """The watchdog that kills the hook's group when Strata dies (tool_executor/hook_runner.py _WATCHED) shares the
    group but not the hook's shell: `wait` in the hook returns once the hook's own child ends, and the hook holds no
    pipe besides its stdin, stdout and stderr (the watchdog's pipe was closed before the hook started)."""
    held = tmp_path / "held.txt"
    path = script(tmp_path, "fds.sh", f"""
        cat >/dev/null
        sleep 0.1 &
        wait
        ls -l /proc/$$/fd > {held}
        echo '{{"decision": "block", "reason": "waited"}}'
    """)
    results = await run_calls(processor(ws, command_hook(path, timeout_s=60.0)), writer,
                              [planned("read_file", {"path": "a.txt"})])
    assert results["c1"].reasons == ("blocked by hook cmd (test-config): waited",), results["c1"]
    pipes = [line.split(" -> ")[0].split()[-1] for line in held.read_text().splitlines() if "-> pipe:" in line]
    assert pipes == ["0", "1", "2"], held.read_text()


# -- PostToolUse ---------------------------------------------------------------------------------------------


async def test_post_hook_add_context_appends_to_the_result(tmp_path: Path, ws: Path, writer: SessionWriter) -> None:
    """A PostToolUse command hook answering add_context appends its text, labelled, after the tool's output."""
    path = script(tmp_path, "context.sh", """
        cat >/dev/null
        echo '{"decision": "add_context", "text": "a.txt is generated; do not edit it"}'
    """)
    hook = command_hook(path, name="post", event="post_tool_use")
    results = await run_calls(processor(ws, hook), writer, [planned("read_file", {"path": "a.txt"})])
    assert results["c1"].status == "ok"
    assert results["c1"].content == ("alpha\n\n\n[context from hook post (test-config)]\n"
                                     "a.txt is generated; do not edit it")


async def test_post_hook_withhold_replaces_the_content(ws: Path, writer: SessionWriter) -> None:
    """A PostToolUse hook answering withhold replaces the output with a notice; the model never sees it."""
    hook = PyHook(HookWithhold("contains a credential"), name="dlp", event="post_tool_use")
    results = await run_calls(processor(ws, hook.hook), writer, [planned("read_file", {"path": "a.txt"})])
    assert results["c1"].content == ("The call ran (status ok), but its output is withheld by hook dlp (code): "
                                     "contains a credential")
    assert "alpha" not in results["c1"].content
    (seen,) = hook.seen
    assert (seen.tool, seen.content, seen.status) == ("read_file", "alpha\n", "ok")


@pytest.mark.parametrize("kind", ["python-raises", "command-exits-non-zero"])
async def test_a_failing_post_hook_withholds_the_result(tmp_path: Path, ws: Path, writer: SessionWriter,
                                                        kind: str) -> None:
    """A PostToolUse hook that fails withholds the output (fail closed) and says how it failed."""
    if kind == "python-raises":

        def boom(data: object) -> object:
            raise ValueError("scanner offline")

        hook, says = PyHook(boom, name="dlp", event="post_tool_use").hook, "crashed (ValueError: scanner offline)"
    else:
        path = script(tmp_path, "post_fail.sh", "cat >/dev/null\nexit 7\n")
        hook, says = command_hook(path, name="dlp", event="post_tool_use"), "exited with status 7"
    results = await run_calls(processor(ws, hook), writer, [planned("read_file", {"path": "a.txt"})])
    content = results["c1"].content
    assert content.startswith("The call ran (status ok), but its output is withheld by hook dlp")
    assert "failed, so the result is withheld (fail closed)" in content
    assert says in content
    assert "alpha" not in content


async def test_post_hooks_do_not_run_for_a_denied_call(ws: Path, writer: SessionWriter) -> None:
    """A call that never ran has no output to check: PostToolUse hooks are not called for a denial."""
    hook = PyHook(HookAddContext("should not appear"), event="post_tool_use")
    results = await run_calls(processor(ws, hook.hook), writer, [planned("read_file", {"path": "../x"})])
    assert results["c1"].status == "denied"
    assert hook.seen == []
