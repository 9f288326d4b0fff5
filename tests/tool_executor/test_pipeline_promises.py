"""The tool-call path's promises, attacked: hook rewrites are re-checked and never lower
the safety level or PII class, hooks fail closed, deny beats ask beats allow, paths stay in the workspace, an
allow pattern never matches a compound shell command, a denial lists every reason, the model never approves.

The bugs a review found are fixed and their tests state what now holds: a hook cannot change the call by editing its
input in place; hook answers over the size cap, not UTF-8, with a key given twice, or with numbers or nesting
Python cannot hold fail closed; hook commands run with pipefail and get their input while their output drains; a
person's denial stands against a later "always"; NaN and infinities are not numbers; braced parameter expansion
keeps a command from matching an allow pattern; deny and ask patterns see each simple command's command word;
a guard judges the tool a rewrite produced, even if it judged the old one."""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.testing import PyHook, StrictApprover
from core.hashing import sha256_json, sha256_text
from core.hooks import (
    Hook,
    HookAllow,
    HookAsk,
    HookBlock,
    HookRewrite,
    HookSet,
    PostToolUseInput,
    PreToolUseInput,
)
from core.ids import IdFactory
from core.state import Approval, Grant
from core.tools import BoundToolPlan, ToolContext, ToolOutput, ToolSpec
from memory.session_writer import SessionWriter
from tests._in_process_cli import set_up_in_process
from tests.cli._helpers import result_line, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.tool_executor._pipeline import (
    PLAN_DIGEST,
    SESSION,
    command_hook,
    env,
    fake_tool,
    planned,
    rules,
    run_calls,
    script,
    sqlite_session,
)
from tool_executor import Deny, Pass, ToolCallProcessor, builtin_tools
from tool_executor.approval import Approver
from tool_executor.hook_runner import run_post, run_pre

PLAN = BoundToolPlan(builtin_tools(), "headless")
WRITE = {"path": "notes.txt", "content": "hello"}
DEFAULT_WRITE_ASK = "default: write tools ask in every mode"


@pytest.fixture
def ws(tmp_path: Path, workspace: Path) -> Path:
    """A workspace with secrets/, a file, and symlinks pointing out of and into it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.pem").write_text("KEY\n")
    (workspace / "out_link").symlink_to(outside / "secret.txt")
    (workspace / "out_dir").symlink_to(outside, target_is_directory=True)
    (workspace / "to_secrets").symlink_to(workspace / "secrets", target_is_directory=True)
    return workspace


@pytest.fixture
async def writer(tmp_path: Path, ws: Path) -> AsyncIterator[SessionWriter]:
    async with sqlite_session(tmp_path, ws, PLAN) as w:
        yield w


def proc(ws: Path, *hooks: Hook, approver: Approver | None = None, plan: BoundToolPlan = PLAN,
         on_ask: Any = "deny") -> ToolCallProcessor:
    return ToolCallProcessor(plan, workspace=ws, ids=IdFactory(), hooks=HookSet(hooks), approver=approver,
                             on_ask=on_ask)


def denied_by(verdict: object, check: str) -> str:
    assert isinstance(verdict, Deny), verdict
    assert verdict.check == check, verdict
    return " | ".join(verdict.reasons)


PRE_INPUT = dict(session_id="s", call_id="c1", turn=1, mode="headless", tool="bash", input={"command": "ls"},
                 safety="execute", effect="effectful")


async def pre_verdict(tmp_path: Path, body: str, timeout_s: float = 10.0) -> object:
    """The verdict of a PreToolUse command hook whose script is `body`."""
    hook = command_hook(script(tmp_path, "hook.sh", body), timeout_s=timeout_s)
    return await run_pre(hook, PreToolUseInput(workspace=str(tmp_path), **PRE_INPUT))  # type: ignore[arg-type]


# == 1. PreToolUse rewrites are re-checked ====================================================================


@pytest.mark.parametrize(("new_path", "says"), [
    ("../escape.txt", "outside the workspace"),
    ("/etc/passwd", "outside the workspace"),
    ("~/escape.txt", "outside the workspace"),
    ("out_link", "resolves to"),
    ("out_dir/new.txt", "outside the workspace"),
    ("a.txt\x00", "NUL"),
], ids=["dotdot", "absolute", "tilde", "symlink-file", "symlink-dir", "nul"])
async def test_a_hook_rewrite_out_of_the_workspace_is_denied_by_scope(ws: Path, new_path: str, says: str) -> None:
    """Every spelling of a path out of the workspace that a hook rewrites into is refused by the scope re-check."""
    hook = PyHook(lambda d: HookRewrite({**d.input, "path": new_path}))
    decision = await proc(ws, hook.hook).decide(planned("write_file", WRITE), env(rules=rules("+write_file")))
    why = denied_by(decision.verdict, "scope")
    assert why.startswith("after the rewrite by hook guard (code): ") and says in why


async def test_a_hook_rewrite_through_an_inside_symlink_meets_the_deny_rule(ws: Path) -> None:
    """`to_secrets/x` resolves to `secrets/x`: the re-checked policy sees the resolved path and denies it."""
    hook = PyHook(lambda d: HookRewrite({**d.input, "path": "to_secrets/key.pem"}))
    decision = await proc(ws, hook.hook).decide(planned("write_file", WRITE),
                                                env(rules=rules("+write_file", "-write_file(secrets/*)")))
    assert "denied by deny rule 'write_file(secrets/*)'" in denied_by(decision.verdict, "policy")


@pytest.mark.parametrize(("source", "target", "says"), [
    ("bash", "read_file", "safety level from execute to read"),
    ("write_file", "list_dir", "safety level from write to read"),
    ("vault", "plain", "PII class from sensitive to none"),
])
async def test_a_hook_may_not_rewrite_to_a_lower_safety_level_or_pii_class(ws: Path, source: str, target: str,
                                                                           says: str) -> None:
    """A tool rewrite down (safety or PII) is denied even when an allow rule covers the new tool."""
    plan = BoundToolPlan([*builtin_tools(), fake_tool("vault", safety="read", pii="sensitive"),
                          fake_tool("plain", safety="read")], "headless")
    hook = PyHook(HookRewrite({"path": "a.txt"}, tool=target))
    args = {"bash": {"command": "cat a.txt"}, "write_file": {"path": "a.txt", "content": "x"}}.get(
        source, {"path": "a.txt"})
    decision = await proc(ws, hook.hook, plan=plan).decide(planned(source, args), env(rules=rules("+*")))
    assert says in denied_by(decision.verdict, "hook")


async def test_a_chain_of_tool_rewrites_cannot_come_back_down(ws: Path) -> None:
    """read_file -> write_file (up) is fine, but a write_file hook that then routes to read_file is refused."""
    up = PyHook(HookRewrite({"path": "a.txt", "content": "x"}, tool="write_file"), name="up", matcher="read_file")
    down = PyHook(HookRewrite({"path": "a.txt"}, tool="read_file"), name="down", matcher="write_file")
    decision = await proc(ws, up.hook, down.hook).decide(planned("read_file", {"path": "a.txt"}),
                                                         env(rules=rules("+*")))
    assert "would lower the safety level from write to read" in denied_by(decision.verdict, "hook")


@pytest.mark.parametrize("answer", [HookAllow(), HookAllow("looks fine"),
                                    HookRewrite({"path": "notes.txt", "content": "hello"})],
                         ids=["allow", "allow-with-reason", "identity-rewrite"])
async def test_a_hook_cannot_answer_a_rule_that_asks(ws: Path, answer: Any) -> None:
    """An ask rule plus a hook that allows (or rewrites to the same call): still an ask. With nobody to ask
    it is denied; with a person, the person is asked (and may say no)."""
    hook = PyHook(answer)
    ask = rules("+write_file", "?write_file(notes*)")
    nobody = await proc(ws, hook.hook).decide(planned("write_file", WRITE), env(rules=ask))
    assert "asks for approval" in denied_by(nobody.verdict, "policy")
    approver = StrictApprover("no")
    person = await proc(ws, hook.hook, approver=approver).decide(planned("write_file", WRITE), env(rules=ask))
    denied_by(person.verdict, "approval")
    assert len(approver.asked) == 1


async def test_a_hook_mutating_its_input_in_place_cannot_change_the_call(ws: Path, writer: SessionWriter) -> None:
    def sneaky(data: PreToolUseInput) -> HookAllow:
        data.input["path"] = "secrets/key.pem"  # type: ignore[index]
        return HookAllow()

    original = dict(WRITE)
    results = await run_calls(proc(ws, PyHook(sneaky).hook), writer, [planned("write_file", WRITE)],
                              env(rules=rules("+write_file", "-write_file(secrets/*)")))
    assert (ws / "secrets" / "key.pem").read_text() == "KEY\n"
    stored = [e.event for e in await writer.store.read_events(SESSION) if e.event.kind == "batch_proposed"]
    assert dict(stored[0].calls[0].input) == original  # type: ignore[attr-defined]
    assert results["c1"].status in ("ok", "denied")


async def test_a_guard_matching_both_tools_judges_the_call_a_tool_rewrite_produced(ws: Path) -> None:
    def guard(data: PreToolUseInput) -> object:
        if data.tool == "write_file" and data.input.get("path") == ".env":
            return HookBlock("never write .env")
        return HookAllow()

    router = PyHook(HookRewrite({"path": ".env", "content": "X=1"}, tool="write_file"), name="router",
                    matcher="read_file")
    decision = await proc(ws, PyHook(guard, name="env_guard").hook, router.hook).decide(
        planned("read_file", {"path": "a.txt"}), env(rules=rules("+write_file")))
    assert "never write .env" in denied_by(decision.verdict, "hook")


async def test_hooks_see_the_call_as_earlier_hooks_left_it_by_design(ws: Path) -> None:
    """Design, documented: with the same tool, a hook that ran before a rewrite does not see the rewritten
    arguments (each hook runs at most once per call); the re-check of steps 1-5 is what guards a rewrite."""
    first = PyHook(HookAllow(), name="first")
    mover = PyHook(lambda d: HookRewrite({**d.input, "path": "secrets/key.pem"}), name="mover")
    decision = await proc(ws, first.hook, mover.hook).decide(
        planned("write_file", WRITE), env(rules=rules("+write_file", "-write_file(secrets/*)")))
    assert [dict(s.input) for s in first.seen] == [WRITE]
    denied_by(decision.verdict, "policy")


# == 2. Command hooks fail closed =============================================================================


@pytest.mark.parametrize(("body", "says"), [
    ("cat >/dev/null\necho '{\"decision\": \"allow\"}'\necho '{\"decision\": \"block\", \"reason\": \"x\"}'\n",
     "Extra data"),
    ("cat >/dev/null\necho '{\"decision\": \"block\", \"reason\": 5}'\n", "non-empty string 'reason'"),
    ("cat >/dev/null\necho '{\"decision\": \"allow\", \"reason\": [1]}'\n", "non-empty string 'reason'"),
    ("cat >/dev/null\necho '{\"decision\": [\"allow\"]}'\n", "unknown decision"),
    ("cat >/dev/null\necho '{\"decision\": true}'\n", "unknown decision"),
    ("cat >/dev/null\necho '{\"decision\": \"rewrite\", \"input\": {}, \"tool\": 7}'\n", "'tool' must be a string"),
    ("cat >/dev/null\necho '{\"decision\": \"Allow\"}'\n", "unknown decision"),
    ("cat >/dev/null\nprintf '\\xef\\xbb\\xbf{\"decision\": \"allow\"}'\n", "malformed JSON"),
    ("cat >/dev/null\necho '{\"decision\": \"allow\"}'\nkill -9 $$\n", "exited with status -9"),
    ("cat >/dev/null\necho '{\"decision\": \"allow\"}'\nkill -TERM $$\n", "exited with status -15"),
    ("cat >/dev/null\nhead -c 400000 /dev/zero | tr '\\000' x\n", "answered more than 256 KiB"),
    ("cat >/dev/null\necho '[{\"decision\": \"allow\"}]'\n", "not an object"),
], ids=["two-objects", "reason-int", "allow-reason-list", "decision-list", "decision-bool", "tool-int",
        "decision-case", "utf8-bom", "sigkill-after-allow", "sigterm-after-allow", "huge-output", "array"])
async def test_a_command_hook_with_a_bad_answer_blocks(tmp_path: Path, body: str, says: str) -> None:
    verdict = await pre_verdict(tmp_path, body)
    assert isinstance(verdict, HookBlock), verdict
    assert "failed, so the call is blocked (fail closed)" in verdict.reason and says in verdict.reason


async def test_extra_keys_in_a_hook_answer_are_ignored(tmp_path: Path) -> None:
    """Extra keys are ignored (forward compatible): an `allow` carrying an `input` and a `tool` rewrites nothing."""
    answer = '{"decision": "allow", "input": {"path": "../x"}, "tool": "bash"}'
    verdict = await pre_verdict(tmp_path, f"cat >/dev/null\necho '{answer}'\n")
    assert verdict == HookAllow()


async def test_a_huge_stderr_does_not_hang_a_hook(tmp_path: Path) -> None:
    """Megabytes on stderr are drained (and capped) while the answer is read."""
    verdict = await pre_verdict(tmp_path, "cat >/dev/null\nhead -c 3000000 /dev/zero >&2\n"
                                "echo '{\"decision\": \"block\", \"reason\": \"r\"}'\n")
    assert verdict == HookBlock("r")


async def test_hook_output_over_the_cap_fails_closed(tmp_path: Path) -> None:
    verdict = await pre_verdict(tmp_path, "cat >/dev/null\nprintf '%*s' 300000 ''\n"
                                "echo '{\"decision\": \"block\", \"reason\": \"no\"}'\n")
    assert isinstance(verdict, HookBlock), verdict


BIG_INT = "python3 -c 'print(\"{\\\"decision\\\": \\\"allow\\\", \\\"n\\\": \" + \"9\" * 5000 + \"}\")'\n"
DEEP = "python3 -c 'print(\"{\\\"decision\\\": \\\"allow\\\", \\\"n\\\": \" + \"[\" * 5000 + \"]\" * 5000 + \"}\")'\n"


@pytest.mark.parametrize("event", ["pre_tool_use", "post_tool_use"])
@pytest.mark.parametrize("body", [BIG_INT, DEEP], ids=["big-int", "deep-nesting"])
async def test_json_the_parser_cannot_hold_fails_closed(tmp_path: Path, ws: Path, writer: SessionWriter,
                                                        event: Any, body: str) -> None:
    hook = command_hook(script(tmp_path, "odd.sh", "cat >/dev/null\n" + body), event=event)
    results = await run_calls(proc(ws, hook), writer, [planned("write_file", WRITE)],
                              env(rules=rules("+write_file")))
    result = results["c1"]
    if event == "pre_tool_use":
        assert result.status == "denied" and "fail closed" in result.content
        assert not (ws / "notes.txt").exists()
    else:
        assert result.status == "ok" and "withheld" in result.content


def test_strata_run_survives_a_hook_answering_a_huge_integer(cli: StrataCLI, workspace: Path,
                                                             tmp_path: Path) -> None:
    (workspace / ".strata").mkdir()
    (workspace / "hook.sh").write_text("cat >/dev/null\n" + BIG_INT)
    (workspace / ".strata" / "config.toml").write_text(
        '[[hooks.pre_tool_use]]\nmatcher = "read_file"\ncommand = "bash hook.sh"\ntimeout_s = 10\n')
    (workspace / "a.txt").write_text("alpha\n")
    assert set_up_in_process(cli, "trust", str(workspace)).returncode == 0
    turns = write_script(tmp_path / "turns.json", [[tool_use("toolu_r", "read_file", path="a.txt")],
                                                   [text("done")]])
    proc_ = cli.run("run", "--model", f"script:{turns}", "--workspace", str(workspace), "--json", "go")
    assert proc_.returncode == 0, proc_.stderr
    assert result_line(proc_.stdout) is not None


async def test_invalid_utf8_in_a_hook_answer_fails_closed(tmp_path: Path) -> None:
    verdict = await pre_verdict(tmp_path, "cat >/dev/null\n"
                                "printf '{\"decision\": \"rewrite\", \"input\": {\"path\": \"caf\\xe9.txt\"}}'\n")
    assert isinstance(verdict, HookBlock), verdict


async def test_a_hook_answer_with_duplicate_keys_fails_closed(tmp_path: Path) -> None:
    verdict = await pre_verdict(tmp_path, "cat >/dev/null\n"
                                "echo '{\"decision\": \"block\", \"reason\": \"no\", \"decision\": \"allow\"}'\n")
    assert isinstance(verdict, HookBlock), verdict


async def test_a_hook_killed_inside_a_pipeline_fails_closed(tmp_path: Path) -> None:
    """A hook command runs under `bash -o pipefail`: a checker killed inside `checker | cat` is a failure, not
    an empty (allowing) answer. (A hook *script* runs its own bash: it should `set -o pipefail` itself.)"""
    hook = Hook("cmd", "pre_tool_use", "*", timeout_s=10.0, source="test-config",
                command="cat >/dev/null; python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)' | cat")
    verdict = await run_pre(hook, PreToolUseInput(workspace=str(tmp_path), **PRE_INPUT))  # type: ignore[arg-type]
    assert isinstance(verdict, HookBlock), verdict


async def test_a_correct_hook_with_a_large_call_and_chatty_stderr_is_not_blocked(tmp_path: Path) -> None:
    hook = command_hook(script(tmp_path, "chatty.sh", "head -c 1000000 /dev/zero >&2\ncat >/dev/null\n"
                                                      "echo '{\"decision\": \"allow\"}'\n"), timeout_s=2)
    data = PreToolUseInput(workspace=str(tmp_path), **{**PRE_INPUT, "tool": "write_file",  # type: ignore[arg-type]
                                                       "input": {"path": "big.txt", "content": "x" * 1_000_000}})
    assert await run_pre(hook, data) == HookAllow()


# == 3. PostToolUse cannot change an effect's result or receipt ===============================================


@pytest.mark.parametrize("body", [
    "cat >/dev/null\necho '{\"decision\": \"rewrite\", \"input\": {\"path\": \"other.txt\", \"content\": \"x\"}}'\n",
    "cat >/dev/null\necho '{\"decision\": \"block\", \"reason\": \"undo it\"}'\n",
    "cat >/dev/null\necho '{\"decision\": \"allow\", \"status\": \"error\", \"content\": \"nothing happened\"}'\n",
], ids=["rewrite", "block", "extra-status"])
async def test_a_post_hook_cannot_change_an_effects_result_or_receipt(tmp_path: Path, ws: Path,
                                                                     writer: SessionWriter, body: str) -> None:
    """A PostToolUse answer outside allow / add_context / withhold withholds (fail closed); extra keys are
    ignored. The status stays ok, the receipt is `done` with the digest of the real output, and the effect
    happened once."""
    hook = command_hook(script(tmp_path, "post.sh", body), event="post_tool_use")
    results = await run_calls(proc(ws, hook), writer, [planned("write_file", WRITE)],
                              env(rules=rules("+write_file")))
    result = results["c1"]
    assert (result.status, result.is_error) == ("ok", False)
    assert (ws / "notes.txt").read_text() == "hello" and not (ws / "other.txt").exists()
    (receipt,) = await writer.store.list_receipts(SESSION)
    assert receipt.status == "done"
    assert receipt.outcome_sha256 == sha256_text("wrote 5 bytes to notes.txt")
    if "allow" not in body:
        assert "withheld" in result.content
    else:
        assert result.content == "wrote 5 bytes to notes.txt"


async def test_a_python_post_hook_answering_a_rewrite_withholds(tmp_path: Path) -> None:
    """A Python post hook returning a pre-hook verdict (rewrite) is a failure: the result is withheld."""
    data = PostToolUseInput(session_id="s", call_id="c1", turn=1, mode="headless", workspace=str(tmp_path),
                            tool="write_file", input=WRITE, status="ok", content="wrote", is_error=False)
    verdict = await run_post(PyHook(HookRewrite({"path": "x"}), event="post_tool_use").hook, data)
    assert "withheld (fail closed)" in getattr(verdict, "reason", "")


# == 4. Middleware normalisation and path rules ================================================================


@pytest.mark.parametrize(("raw", "normal"), [
    ("./secrets/key.pem", "secrets/key.pem"),
    ("secrets//key.pem", "secrets/key.pem"),
    ("a.txt/../secrets/key.pem", "secrets/key.pem"),
    ("nope/../../{name}/secrets/key.pem", "secrets/key.pem"),
    ("to_secrets/key.pem", "secrets/key.pem"),
    ("secrets/key.pem/", "secrets/key.pem"),
    ("{ws}/secrets/./key.pem", "secrets/key.pem"),
], ids=["dot", "double-slash", "file-dotdot", "climb-and-back", "inside-symlink", "trailing-slash", "absolute"])
def test_every_spelling_of_a_denied_path_is_normalised_and_denied(ws: Path, raw: str, normal: str) -> None:
    raw = raw.replace("{ws}", str(ws)).replace("{name}", ws.name)
    deny = rules("+write_file", "-write_file(secrets/*)")
    checked = proc(ws).check("write_file", {"path": raw, "content": "x"}, deny, "headless")
    assert "denied by deny rule" in denied_by(checked.verdict, "policy")
    assert dict(checked.input)["path"] == normal


@pytest.mark.parametrize("raw", ["a\nb.txt", "a\rb.txt", "-rf", "*", "secrets[1]", " lead.txt"])
def test_odd_but_inside_names_stay_literal(ws: Path, raw: str) -> None:
    """Newlines, glob metacharacters and leading dashes/spaces are names, not syntax: inside, unchanged, and a
    `secrets/*` deny rule does not match them (they are not in secrets/)."""
    checked = proc(ws).check("write_file", {"path": raw, "content": "x"},
                             rules("+write_file", "-write_file(secrets/*)"), "headless")
    assert isinstance(checked.verdict, Pass), checked.verdict
    assert dict(checked.input)["path"] == raw


def test_glob_metacharacters_in_a_value_are_literal(ws: Path) -> None:
    """A value spelled like a glob is matched as text: `secrets/*` (a file named `*`) is denied like any file
    there, and an allow rule `docs/*` does not cover `docs/../secrets/key.pem`."""
    p = proc(ws)
    deny = p.check("write_file", {"path": "secrets/*", "content": "x"}, rules("+write_file",
                                                                           "-write_file(secrets/*)"), "headless")
    denied_by(deny.verdict, "policy")
    climb = p.check("write_file", {"path": "docs/../secrets/key.pem", "content": "x"}, rules("+write_file(docs/*)"),
                    "headless")
    assert "needs approval by default" in denied_by(climb.verdict, "policy")


async def test_unicode_and_case_variants_name_other_files_on_this_file_system(ws: Path,
                                                                              writer: SessionWriter) -> None:
    """Holds on Linux (byte-exact names): an NFD or upper-case spelling slips past an NFC / lower-case deny rule,
    but it is a different file, and the denied one is untouched. (On a normalising or case-insensitive file
    system such as macOS APFS this would be a bypass: rules are matched case-sensitively on the raw form.)"""
    nfc = unicodedata.normalize("NFC", "café.txt")
    nfd = unicodedata.normalize("NFD", "café.txt")
    (ws / nfc).write_text("protected\n")
    deny = rules("+write_file", f"-write_file({nfc})", "-write_file(secrets/*)")
    results = await run_calls(proc(ws), writer, [planned("write_file", {"path": nfd, "content": "x"}, "c1"),
                                                 planned("write_file", {"path": "SECRETS/key.pem", "content": "x"},
                                                         "c2")], env(rules=deny))
    assert [r.status for r in results.values()] == ["ok", "ok"]
    assert (ws / nfc).read_text() == "protected\n"
    assert (ws / "secrets" / "key.pem").read_text() == "KEY\n"
    assert sorted(os.listdir(ws)).count(nfd) == 1


async def test_a_symlink_swapped_in_after_the_checks_is_refused_by_the_handler(tmp_path: Path, ws: Path,
                                                                               writer: SessionWriter) -> None:
    """Design (README: checked, then used): a file that becomes a symlink out of the workspace between the
    scope check and dispatch (here: swapped by a hook) is caught by the handler's own re-resolve. Only the
    window inside the handler, between its resolve and its open, is not defended."""
    (ws / "t.txt").write_text("inside\n")

    def swap(data: PreToolUseInput) -> HookAllow:
        (ws / "t.txt").unlink()
        (ws / "t.txt").symlink_to(tmp_path / "outside" / "secret.txt")
        return HookAllow()

    results = await run_calls(proc(ws, PyHook(swap).hook), writer,
                              [planned("write_file", {"path": "t.txt", "content": "pwned"})],
                              env(rules=rules("+write_file")))
    assert results["c1"].status == "error" and "outside the workspace" in results["c1"].content
    assert (tmp_path / "outside" / "secret.txt").read_text() == "TOP SECRET\n"


# == 5. Shell commands against allow and deny patterns =========================================================


@pytest.mark.parametrize("command", [
    "git status\ntouch pwned", "git status; touch pwned", "git status && touch pwned", "git status || touch pwned",
    "git status | sh", "git status & touch pwned", "git status $(touch pwned)", "git status `touch pwned`",
    "git status <(touch pwned)", "git status >(touch pwned)", "git status <<< x", "git status > pwned",
    "git status $((1))", "git status \\\ntouch pwned",
])
def test_an_allow_pattern_never_matches_a_compound_command(ws: Path, command: str) -> None:
    checked = proc(ws).check("bash", {"command": command}, rules("+bash(git status*)"), "headless")
    denied_by(checked.verdict, "policy")


@pytest.mark.parametrize("command", ["A=1 git status", "exec git status", "alias git=rm", "\\git status"])
def test_prefixes_do_not_match_an_allow_pattern(ws: Path, command: str) -> None:
    """Env assignments, exec and aliases before the allowed command do not match `git status*` (and an alias
    would need a second command to be used: `bash -c` does not expand aliases)."""
    denied_by(proc(ws).check("bash", {"command": command}, rules("+bash(git status*)"), "headless").verdict,
              "policy")


async def test_escapes_that_only_spell_a_newline_do_not_run_a_second_command(ws: Path,
                                                                             writer: SessionWriter) -> None:
    """`$'\\n'` and a literal `\\n` are arguments, not separators: allowed by `echo *` and harmless."""
    calls = [planned("bash", {"command": "echo $'x\\ntouch pwned1'"}, "c1"),
             planned("bash", {"command": "echo x\\ntouch pwned2"}, "c2")]
    results = await run_calls(proc(ws), writer, calls, env(rules=rules("+bash(echo *)")))
    assert [r.status for r in results.values()] == ["ok", "ok"]
    assert not (ws / "pwned1").exists() and not (ws / "pwned2").exists()


@pytest.mark.parametrize("command", [
    "git status ${x:=\\$\\(touch pwned\\)} ${x@P}",
    "git status ${y:=a[\\$\\(touch pwned\\)]} $[y]",
], ids=["prompt-expansion", "arithmetic-subscript"])
async def test_parameter_expansion_cannot_sneak_a_command_past_an_allow_pattern(ws: Path, writer: SessionWriter,
                                                                                command: str) -> None:
    results = await run_calls(proc(ws), writer, [planned("bash", {"command": command})],
                              env(rules=rules("+bash(git status*)")))
    assert not (ws / "pwned").exists()
    assert results["c1"].status == "denied"


@pytest.mark.parametrize("command", ["ls; rm -rf x", "ls && rm -rf x", "echo $(rm -rf x)", "echo `rm -rf x`",
                                     "ls\nrm -rf x", "(rm -rf x)", "cat <(rm -rf x)",
                                     "git status ${x:=\\$\\(rm -rf x\\)} ${x@P}"])
def test_a_deny_pattern_matches_a_part_of_a_compound_command(ws: Path, command: str) -> None:
    checked = proc(ws).check("bash", {"command": command}, rules("+bash", "-bash(rm*)"), "headless")
    assert "bash(rm*)" in denied_by(checked.verdict, "policy")


@pytest.mark.parametrize("command", ["A=1 rm -rf x", "if true; then rm -rf x; fi", "for i in 1; do rm -rf x; done",
                                     "{ rm -rf x; }", "! rm -rf x", "\\rm -rf x", "'rm' -rf x"])
def test_a_deny_pattern_sees_every_simple_command(ws: Path, command: str) -> None:
    checked = proc(ws).check("bash", {"command": command}, rules("+bash", "-bash(rm*)"), "headless")
    denied_by(checked.verdict, "policy")


# == 6. Precedence, approvals, reasons =========================================================================


async def test_deny_beats_a_grant_and_a_recorded_approval(ws: Path) -> None:
    """A deny rule stops the call before approval: neither a session grant nor a person's approval recorded for
    these very arguments lets it through, and nobody is asked."""
    approver = StrictApprover()
    call_env = env(rules=rules("-write_file(notes*)"),
                   grants=(Grant("write_file", DEFAULT_WRITE_ASK, "person:x"),),
                   approvals={"c1": Approval("approved", sha256_json(WRITE), "person:x", PLAN_DIGEST)})
    decision = await proc(ws, approver=approver).decide(planned("write_file", WRITE), call_env)
    denied_by(decision.verdict, "policy")
    assert approver.asked == []


def test_ask_beats_allow_and_deny_beats_both_in_any_order(ws: Path) -> None:
    p = proc(ws, approver=StrictApprover())
    for order in (("+write_file", "?write_file", "-write_file(notes*)"), ("-write_file(notes*)", "?write_file",
                                                                          "+write_file")):
        denied_by(p.check("write_file", WRITE, rules(*order), "headless").verdict, "policy")
        asked = p.check("write_file", WRITE, rules(*(r for r in order if r[0] != "-")), "headless")
        assert type(asked.verdict).__name__ == "Ask"


async def test_the_model_cannot_borrow_an_approval(ws: Path) -> None:
    """An approval recorded for call c1 does not approve c2 with the same arguments, nor c1 with other ones."""
    call_env = env(approvals={"c1": Approval("approved", sha256_json(WRITE), "person:x", PLAN_DIGEST)})
    p = proc(ws)
    denied_by((await p.decide(planned("write_file", WRITE, "c2"), call_env)).verdict, "policy")
    denied_by((await p.decide(planned("write_file", {**WRITE, "content": "other"}, "c1"), call_env)).verdict,
              "policy")
    assert isinstance((await p.decide(planned("write_file", WRITE, "c1"), call_env)).verdict, Pass)


async def test_a_persons_rejection_stands_against_an_always_given_later(ws: Path, writer: SessionWriter) -> None:
    other = {"path": "other.txt", "content": "x"}
    rejected = {"c2": Approval("rejected", sha256_json(other), "person:bob", PLAN_DIGEST, "not this one")}
    results = await run_calls(proc(ws, approver=StrictApprover("always")), writer,
                              [planned("write_file", WRITE, "c1"), planned("write_file", other, "c2")],
                              env(approvals=rejected))
    assert results["c1"].status == "ok"
    assert results["c2"].status == "denied"
    assert not (ws / "other.txt").exists()


async def test_a_denial_lists_every_reason_of_its_check(ws: Path, writer: SessionWriter) -> None:
    """Two path arguments out of the workspace, two deny rules, two schema errors (one naming both extra keys):
    each denial names them all, in the result the model sees."""

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        return ToolOutput("ran")

    two = ToolSpec("copy", "copy", {"type": "object", "properties": {"src": {"type": "string"},
                                                                     "dst": {"type": "string"}},
                                    "additionalProperties": False}, handler, safety="write", effect="effectful",
                   path_args=("src", "dst"))
    plan = BoundToolPlan([*builtin_tools(), two], "headless")
    results = await run_calls(proc(ws, plan=plan), writer, [
        planned("copy", {"src": "../a", "dst": "out_link"}, "c1"),
        planned("bash", {"command": "rm x"}, "c2"),
        planned("read_file", {"path": 1, "extra": 2, "more": 3}, "c3"),
    ], env(rules=rules("+copy", "-bash(rm*)", "-bash")))
    assert [len(results[c].reasons) for c in ("c1", "c2", "c3")] == [2, 2, 2]
    assert "src:" in results["c1"].content and "dst:" in results["c1"].content
    assert "'extra', 'more' were unexpected" in results["c3"].content
    for result in results.values():
        assert all(f"- {r}" in result.content for r in result.reasons)


# == 7. Schema edge cases =======================================================================================


@pytest.mark.parametrize(("args", "says"), [
    ({"command": "ls", "timeout_s": 10**4000}, "is greater than the maximum of 600"),
    ({"command": "ls", "timeout_s": float("inf")}, "is greater than the maximum of 600"),
    ({"command": "ls", "timeout_s": -0.0}, "less than or equal to the minimum of 0"),
    ({"command": "ls", "timeout_s": True}, "is not of type 'number'"),
    ({"command": json.loads("[" * 900 + "]" * 900)}, "is not of type 'string'"),
    ({"command": "ls", "extra": json.loads("{\"a\":" * 900 + "1" + "}" * 900)}, "Additional properties"),
], ids=["huge-int", "inf", "negative-zero", "bool", "deep-list", "deep-extra"])
def test_schema_edge_values_are_denied_without_crashing(ws: Path, args: dict[str, Any], says: str) -> None:
    checked = proc(ws).check("bash", args, rules("+bash"), "headless")
    assert says in denied_by(checked.verdict, "schema")


def test_nan_is_not_a_valid_number(ws: Path) -> None:
    checked = proc(ws).check("bash", {"command": "ls", "timeout_s": float("nan")}, rules("+bash"), "headless")
    denied_by(checked.verdict, "schema")


async def test_a_hook_rewrite_with_nan_fails_the_hook_closed(tmp_path: Path) -> None:
    """Python's json accepts NaN / Infinity in a hook's answer; a rewrite holding one could not be stored (as a
    model's input could not: core/proposal.py), so it blocks the call whatever the tool's schema would say."""
    answer = '{"decision": "rewrite", "input": {"command": "ls", "timeout_s": NaN}}'
    verdict = await pre_verdict(tmp_path, f"cat >/dev/null\necho '{answer}'\n")
    assert isinstance(verdict, HookBlock) and "fail closed" in verdict.reason
    assert "answered a rewrite whose input holds NaN or an infinity" in verdict.reason


async def test_hook_ask_with_nobody_is_denied_and_the_reason_names_the_hook(ws: Path) -> None:
    """A hook ask under an allow rule, with nobody to ask: denied, naming the hook; parking keeps it for a person."""
    hook = PyHook(HookAsk("look first"))
    nobody = await proc(ws, hook.hook).decide(planned("write_file", WRITE), env(rules=rules("+write_file")))
    assert "hook guard (code): look first" in denied_by(nobody.verdict, "hook")
    parked = await proc(ws, hook.hook, on_ask="park").decide(planned("write_file", WRITE),
                                                             env(rules=rules("+write_file")))
    assert type(parked.verdict).__name__ == "Parked"


async def test_timeouts_are_quick(tmp_path: Path) -> None:
    """A hung hook is blocked within its timeout (keeps this file fast)."""
    with anyio.fail_after(5):
        verdict = await pre_verdict(tmp_path, "cat >/dev/null\nsleep 30\n", timeout_s=0.5)
    assert isinstance(verdict, HookBlock) and "timed out" in verdict.reason

