"""A PreToolUse hook's rewrite is untrusted input as a model's answer is: arguments that could not be stored (text
that is not valid UTF-8, a JSON escape of a lone surrogate) fail the hook closed, with a timeline row, instead of
crashing `strata run` before anything was recorded, and again on every `strata resume` (a wedged session).
A hook's words (an ask's reason, a Stop hook's repair instruction, added context) are text: a lone surrogate in
them is repaired to U+FFFD, as in a model's text, instead of refusing the commit that parks the call or asks the
repair, on every resume again. Real `strata` processes, a real bash hook from the user's config, a real SQLite home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

REWRITES = {
    "surrogate in a value": '{"decision": "rewrite", "input": {"path": "out.txt", "content": "x\\ud800y"}}',
    "surrogate in a key": '{"decision": "rewrite", "input": {"path": "out.txt", "content": "xy", "\\udfff": 1}}',
}


def _hook(cli: StrataCLI, tmp_path: Path, answer: str, event: str = "pre_tool_use") -> None:
    (tmp_path / "answer.json").write_text(answer + "\n", encoding="utf-8")
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    command = f"cat {tmp_path / 'answer.json'}"
    config.write_text(f'[[hooks.{event}]]\nmatcher = "write_file"\ncommand = "{command}"\n', encoding="utf-8")


def _messages(cli: StrataCLI, session_id: str) -> str:
    return json.dumps(show_in_process(cli, session_id)["messages"], ensure_ascii=False)


@pytest.mark.parametrize("answer", REWRITES.values(), ids=REWRITES.keys())
def test_a_rewrite_with_text_that_is_not_utf8_blocks_the_call_and_is_recorded(cli: StrataCLI, workspace: Path,
                                                                              tmp_path: Path, answer: str) -> None:
    _hook(cli, tmp_path, answer)
    turns = write_script(tmp_path / "turns.json", [
        [text("w"), tool_use("c1", "write_file", path="out.txt", content="hi\n")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{turns}", "--workspace", str(workspace), "--allow", "write_file",
                 "--json", "go")
    assert run.returncode == 0, run.stderr
    result = result_line(run.stdout)
    assert result is not None and result["status"] == "completed"
    assert not (workspace / "out.txt").exists()
    rows = json_lines_in_process(cli, "timeline", result["session_id"], "--json")
    (hook_row,) = [r for r in rows if r["kind"] == "hook"]
    (call_row,) = [r for r in rows if r["kind"] == "call"]
    assert hook_row["outcome"] == "block" and "fail closed" in hook_row["summary"], hook_row
    (denied,) = [b for m in show_in_process(cli, result["session_id"])["messages"] if m["role"] == "user"
                 for b in m["content"] if b["type"] == "tool_result"]
    assert denied["is_error"] and "answered a rewrite whose input holds text that is not valid UTF-8" in \
        denied["content"], denied
    assert call_row["decision"] == "denied" and call_row["call_id"] == "c1"
    assert strata(cli, "timeline", result["session_id"], "--verify").returncode == 0


def test_a_hook_ask_whose_reason_is_not_utf8_parks_and_resumes(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    _hook(cli, tmp_path, '{"decision": "ask", "reason": "look\\ud800 first"}')
    turns = write_script(tmp_path / "turns.json", [
        [text("w"), tool_use("c1", "write_file", path="out.txt", content="hi\n")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{turns}", "--workspace", str(workspace), "--allow", "write_file",
                 "--on-ask", "park", "--json", "go")
    assert run.returncode == 4, run.stderr
    result = result_line(run.stdout)
    assert result is not None and [p["call_id"] for p in result["parked"]] == ["c1"]
    assert strata(cli, "approve", result["session_id"], "c1").returncode == 0
    resumed = strata(cli, "resume", result["session_id"])
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "out.txt").read_text() == "hi\n"
    rows = json_lines_in_process(cli, "timeline", result["session_id"], "--json")
    assert any(r["kind"] == "hook" and r["outcome"] == "ask" and "look\ufffd first" in r["summary"] for r in rows)


def test_a_stop_hook_repair_whose_instruction_is_not_utf8_is_asked_of_the_model(cli: StrataCLI, workspace: Path,
                                                                                  tmp_path: Path) -> None:
    _hook(cli, tmp_path, '{"decision": "repair", "instruction": "say\\ud800 more"}', event="stop")
    turns = write_script(tmp_path / "turns.json", [[text("first")], [text("second")], [text("third")]])
    run = strata(cli, "run", "--model", f"script:{turns}", "--workspace", str(workspace), "--json", "go")
    assert run.returncode == 3, run.stderr  # the hook asks for ever: the repair budget (2) runs out
    result = result_line(run.stdout)
    assert result is not None
    assert _messages(cli, result["session_id"]).count("say\ufffd more") == 2
