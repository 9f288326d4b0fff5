"""Model output that used to wedge a session for ever, through the real `strata` process and the scripted model:
a tool input nested hundreds of levels deep, unpaired surrogates in a tool input and in text, an id the model
reuses in a later turn, and a script file nested thousands of levels deep.

The promise under test: the plan phase judges a proposal as a whole before it is committed. Whatever the model
says, the run ends without a traceback or an "internal error", a refused call gets a denial from the `plan`
check that says why, and afterwards the session opens (`show`), resumes and forks, with every `tool_use`
answered by exactly one `tool_result` and no id used twice."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.proposal import MAX_INPUT_DEPTH
from tests._in_process_cli import json_lines_in_process, run_in_process, set_up_in_process, show_in_process
from tests.cli._helpers import assert_clean_stderr, check_pairing, error_lines, events_of, result_line, text, tool_use
from tests.conftest import StrataCLI, write_script


def nested(levels: int) -> dict[str, Any]:
    """An object nested `levels` deep: {"a": {"a": ... {} ...}}."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def run_json(cli: StrataCLI, workspace: Path, script: Path, *extra: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    proc = cli.run("run", "--json", "--workspace", str(workspace), "--model", f"script:{script}", *extra, "go")
    assert_clean_stderr(proc)
    result = result_line(proc.stdout)
    assert result is not None, (proc.stdout, proc.stderr)
    return result, events_of(proc.stdout)


def tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for m in messages if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]


def assert_session_usable(cli: StrataCLI, session_id: str, workspace: Path) -> dict[str, Any]:
    """The session shows, every tool_use has one tool_result and no id repeats; it resumes with a new prompt and
    forks. Returns the `show --json` view taken first. The resume and the fork run in this process
    (tests/_in_process_cli.py): the run is the process these tests are about."""
    view = show_in_process(cli, session_id)
    results = check_pairing(view["messages"])
    ids = [b["id"] for b in tool_uses(view["messages"])]
    assert len(ids) == len(set(ids)), f"a tool_use id is used twice: {ids}"
    assert set(results) == set(ids)
    text_view = run_in_process(cli, "show", session_id)
    assert_clean_stderr(text_view)
    assert text_view.returncode == 0, text_view.stderr
    again = set_up_in_process(cli, "resume", session_id, "--json", "one more thing")
    assert_clean_stderr(again)
    assert again.returncode == 0, again.stderr
    check_pairing(show_in_process(cli, session_id)["messages"])
    last = max(e["seq"] for e in events_of(again.stdout))
    fork = set_up_in_process(cli, "fork", session_id, "--at-event", str(last), "--json")
    assert_clean_stderr(fork)
    assert fork.returncode == 0, fork.stderr
    return view


def test_tool_input_nested_past_the_limit_is_denied_by_the_plan_check(cli: StrataCLI, workspace: Path,
                                                                       tmp_path: Path) -> None:
    """A tool input nested 300 levels deep is refused before it is committed: the call gets a `plan` denial
    naming the limit, its input in the conversation is a placeholder, and the session stays usable."""
    script = write_script(tmp_path / "deep.json", [
        [text("Here it comes."), tool_use("deep1", "read_file", path="a.txt", deep=nested(300))],
        [text("Understood.")],
    ])
    result, events = run_json(cli, workspace, script)
    assert result["status"] == "completed", result
    (denial,) = [e for e in events if e["kind"] == "call_result"]
    assert (denial["status"], denial["check"]) == ("denied", "plan"), denial
    assert f"nested more than {MAX_INPUT_DEPTH} levels" in denial["content"], denial["content"]
    view = assert_session_usable(cli, result["session_id"], workspace)
    (use,) = tool_uses(view["messages"])
    assert "deep" not in use["input"] and len(json.dumps(use["input"])) < 400, use["input"]
    rows = json_lines_in_process(cli, "timeline", result["session_id"], "--json", "--kind", "call")
    assert [(r["decision"], r["check"]) for r in rows] == [("denied", "plan")], rows


def test_unpaired_surrogates_in_a_tool_input_and_in_text_are_replaced(cli: StrataCLI, workspace: Path,
                                                                      tmp_path: Path) -> None:
    """`\\ud800` in a tool input (key and value) and in the answer's text: stored as U+FFFD, the call runs on
    the repaired input, and the session shows, resumes and forks."""
    (workspace / "a\ufffd.txt").write_text("found\n")
    script = tmp_path / "surrogates.json"
    script.write_text('[[{"type": "text", "text": "look \\ud800 here"}, {"type": "tool_use", "id": "s1", '
                      '"name": "read_file", "input": {"path": "a\\udfff.txt"}}], '
                      '[{"type": "tool_use", "id": "s2", "name": "read_file", "input": {"\\ud800": 1}}], '
                      '[{"type": "text", "text": "done \\udbff"}]]', encoding="utf-8")
    result, events = run_json(cli, workspace, script)
    assert result["status"] == "completed", result
    results = {e["call_id"]: e for e in events if e["kind"] == "call_result"}
    assert results["s1"]["status"] == "ok" and "found" in results["s1"]["content"], results["s1"]
    assert results["s2"]["check"] == "schema", results["s2"]  # the repaired key is still an unknown argument
    view = assert_session_usable(cli, result["session_id"], workspace)
    dumped = json.dumps(view["messages"], ensure_ascii=False)
    assert "\ufffd" in dumped and "look \ufffd here" in dumped and "done \ufffd" in dumped
    plan_rows = [r for r in json_lines_in_process(cli, "timeline", result["session_id"], "--json", "--kind", "phase")
                 if r["outcome"] == "plan"]
    assert plan_rows and all("U+FFFD" in r["summary"] for r in plan_rows), plan_rows


def test_an_id_reused_in_a_later_turn_is_renamed(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A resumed session answered by another script that reuses an id of an earlier turn: the new call gets a
    fresh id in the conversation and its result, so no id is used twice and later requests stay valid."""
    (workspace / "a.txt").write_text("alpha\n")
    first = write_script(tmp_path / "first.json", [[tool_use("same", "read_file", path="a.txt")], [text("one")]])
    result, _ = run_json(cli, workspace, first)
    session_id = result["session_id"]
    second = write_script(tmp_path / "second.json", [
        [text("unused")], [text("unused")], [tool_use("same", "read_file", path="a.txt")], [text("two")]])
    proc = cli.run("resume", session_id, "--json", "--model", f"script:{second}", "again")
    assert_clean_stderr(proc)
    assert proc.returncode == 0, proc.stderr
    view = assert_session_usable(cli, session_id, workspace)
    ids = [b["id"] for b in tool_uses(view["messages"])]
    assert ids[0] == "same" and len(ids) == 2 and ids[1] != "same", ids
    renamed = [e for e in events_of(proc.stdout) if e["kind"] == "call_result"]
    assert [e["call_id"] for e in renamed] == [ids[1]] and renamed[0]["status"] == "ok", renamed


def test_script_nested_thousands_of_levels_is_one_usage_error(cli: StrataCLI, workspace: Path,
                                                              tmp_path: Path) -> None:
    """A script file nested 2,000 levels deep is a usage error in one line (exit 2), never a RecursionError,
    and no session is created."""
    script = tmp_path / "nested.json"
    script.write_text("[" * 2000 + "]" * 2000, encoding="utf-8")
    proc = cli.run("run", "--workspace", str(workspace), "--model", f"script:{script}", "go")
    assert_clean_stderr(proc)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert "nested deeper than" in line and str(script) in line, line
    assert json_lines_in_process(cli, "sessions", "--json") == []


def test_tool_output_that_is_not_utf8_is_stored_repaired(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A file whose name is not UTF-8 (Python reads it with surrogateescape) listed by `list_dir`: the result is
    stored with U+FFFD in its place; it used to end the run with an internal error, and a resume re-ran the
    read-only call into the same error."""
    (workspace / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    script = write_script(tmp_path / "list.json", [[tool_use("l1", "list_dir", path=".")], [text("Listed.")]])
    result, events = run_json(cli, workspace, script)
    assert result["status"] == "completed", result
    (listing,) = [e for e in events if e["kind"] == "call_result"]
    assert listing["status"] == "ok" and "caf\ufffd.txt" in listing["content"], listing
    assert_session_usable(cli, result["session_id"], workspace)


def test_a_prompt_that_is_not_utf8_is_stored_repaired(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A prompt whose bytes are not UTF-8 (`run` and `resume`): kept with U+FFFD in their place, as a model's text
    is; it used to end in an internal error before the session was even stored."""
    script = write_script(tmp_path / "hi.json", [[text("Hello.")]])
    bad = os.fsdecode(b"caf\xe9 now")
    proc = cli.run("run", "--json", "--workspace", str(workspace), "--model", f"script:{script}", bad)
    assert_clean_stderr(proc)
    result = result_line(proc.stdout)
    assert result is not None and result["status"] == "completed", (proc.stdout, proc.stderr)
    again = cli.run("resume", result["session_id"], "--json", bad)
    assert_clean_stderr(again)
    assert again.returncode == 0, again.stderr
    texts = [b["text"] for m in show_in_process(cli, result["session_id"])["messages"] if m["role"] == "user"
             for b in m["content"]]
    assert texts.count("caf\ufffd now") == 2, texts
