"""The scripted model: strict about its script (every defect is a ScriptError naming the entry), deterministic in
its ids, and answering turn k with entry k so a resumed session continues where it stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.errors import ScriptError
from core.messages import Message, TextBlock, ToolUseBlock
from core.model.base import ModelAttempt, ModelRequest
from core.model.scripted import FINAL_TEXT, ScriptedModel, load_script, parse_script

TEXT = {"type": "text", "text": "hello"}
TOOL = {"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}}


def write(tmp_path: Path, script: Any) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


def request(turn: int) -> ModelRequest:
    messages = [Message(role="user", content=(TextBlock(text="go"),))]
    return ModelRequest(system="", messages=messages, tools=[], turn=turn)


# -- malformed scripts ----------------------------------------------------------------------------------------

MALFORMED: dict[str, tuple[Any, str, str]] = {
    # name: (script, entry named in the error, words of the reason)
    "turn_not_a_list": ([[TEXT], "say hi"], "turn 1", "non-empty list"),
    "empty_turn": ([[TEXT], []], "turn 1", "non-empty list"),
    "block_not_an_object": ([[TEXT], ["hello"]], "turn 1, block 0", "must be an object"),
    "unknown_block_type": ([[TEXT], [{"type": "image", "source": "x"}]], "turn 1, block 0", "unknown block type"),
    "missing_block_type": ([[TEXT], [TEXT, {"text": "no type"}]], "turn 1, block 1", "unknown block type"),
    "text_extra_key": ([[TEXT], [{"type": "text", "text": "x", "cache": True}]], "turn 1, block 0", "cache"),
    "text_not_a_string": ([[{"type": "text", "text": 3}]], "turn 0, block 0", "text block"),
    "tool_extra_key": ([[TEXT], [TEXT, {**TOOL, "arguments": {}}]], "turn 1, block 1", "arguments"),
    "tool_without_name": ([[TEXT], [{"type": "tool_use", "input": {}}]], "turn 1, block 0", "name"),
    "tool_empty_name": ([[TEXT], [{"type": "tool_use", "name": "", "input": {}}]], "turn 1, block 0", "name"),
    "tool_input_not_an_object": ([[TEXT], [{**TOOL, "input": ["a.txt"]}]], "turn 1, block 0", "input"),
    "tool_input_null": ([[TEXT], [{**TOOL, "input": None}]], "turn 1, block 0", "input"),
    "tool_id_not_a_string": ([[TEXT], [{**TOOL, "id": 7}]], "turn 1, block 0", "id"),
    "tool_id_empty": ([[TEXT], [{**TOOL, "id": ""}]], "turn 1, block 0", "id"),
    "duplicate_ids_in_a_turn": ([[TEXT], [{**TOOL, "id": "t1"}, {**TOOL, "id": "t1"}]], "turn 1, block 1", "unique"),
    "explicit_id_equal_to_a_generated_one": ([[{**TOOL, "id": "toolu_s00000_01"}, TOOL]], "turn 0, block 1",
                                             "unique"),
    "duplicate_ids_across_turns": ([[{**TOOL, "id": "t1"}], [{**TOOL, "id": "t1"}]], "turn 1, block 0", "unique"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_script_is_a_script_error_naming_the_entry(case: str) -> None:
    """Each kind of defect raises ScriptError with the entry (turn, block) and a reason that says what is wrong."""
    script, entry, reason = MALFORMED[case]
    with pytest.raises(ScriptError) as info:
        parse_script(script, "demo.json")
    err = info.value
    assert err.entry == entry
    assert err.path == "demo.json"
    assert reason in err.reason
    assert f"demo.json at {entry}" in str(err)


@pytest.mark.parametrize("script", ["hello", 3, None])
def test_script_that_is_not_a_list_is_refused(script: Any) -> None:
    """The top level must be a JSON list of turns (or an object of turns and children); anything else names what
    it got."""
    with pytest.raises(ScriptError, match="expected a JSON list of turns") as info:
        parse_script(script, "demo.json")
    assert info.value.entry is None


def test_script_error_is_a_usage_level_failure_with_a_hint() -> None:
    """A bad script is the user's input to fix: exit code 2 and a hint on the expected shape."""
    with pytest.raises(ScriptError) as info:
        parse_script([[]], "demo.json")
    assert info.value.exit_code == 2
    assert info.value.hint and "JSON list" in info.value.hint


def test_invalid_json_file_is_a_script_error_with_position(tmp_path: Path) -> None:
    """A file that is not JSON names the file and where parsing stopped."""
    path = tmp_path / "broken.json"
    path.write_text('[[{"type": "text", "text": "hi"}]\n', encoding="utf-8")
    with pytest.raises(ScriptError, match="not valid JSON") as info:
        load_script(path)
    assert info.value.path == str(path)
    assert "line" in info.value.reason


@pytest.mark.parametrize(("content", "reason"), [
    ("[" * 2000 + "]" * 2000, "nested deeper than"),
    ('[[{"type": "tool_use", "name": "x", "input": {"n": ' + "9" * 5000 + "}}]]", "not valid JSON"),
])
def test_hostile_json_file_is_one_script_error(tmp_path: Path, content: str, reason: str) -> None:
    """A file nested thousands of levels deep, or holding a number Python will not convert, is a ScriptError
    naming the file, never a RecursionError or a bare ValueError."""
    path = tmp_path / "hostile.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ScriptError, match=reason) as info:
        load_script(path)
    assert info.value.path == str(path)


def test_what_a_turn_says_is_left_to_the_plan_phase(tmp_path: Path) -> None:
    """Ids outside the API's alphabet, inputs nested hundreds of levels, unpaired surrogates: the script loads
    them as a model would send them (the plan phase judges them), so a script can play a hostile model."""
    deep: dict[str, Any] = {}
    for _ in range(300):
        deep = {"a": deep}
    path = write(tmp_path, [[{"type": "text", "text": "x\ud800"},
                             {"type": "tool_use", "id": "call 1/2", "name": "read_file", "input": deep}]])
    ((text, use),) = load_script(path)
    assert isinstance(text, TextBlock) and text.text == "x\ud800"
    assert isinstance(use, ToolUseBlock) and use.id == "call 1/2" and use.input == deep


def test_missing_file_is_a_script_error(tmp_path: Path) -> None:
    """A script that cannot be read is a ScriptError naming the path, not an OSError."""
    path = tmp_path / "nope.json"
    with pytest.raises(ScriptError, match="cannot read it") as info:
        ScriptedModel.from_file(path)
    assert info.value.path == str(path)


def test_file_errors_name_the_entry_too(tmp_path: Path) -> None:
    """A defect found in a file names the file and the entry."""
    path = write(tmp_path, [[TEXT], [TEXT, {"type": "tool_use", "name": "x", "input": {}, "bogus": 1}]])
    with pytest.raises(ScriptError) as info:
        load_script(path)
    assert (info.value.path, info.value.entry) == (str(path), "turn 1, block 1")


# -- well-formed scripts ---------------------------------------------------------------------------------------


def test_generated_tool_ids_are_deterministic() -> None:
    """Tool ids without an explicit id are derived from (turn, block), the same on every load; explicit ids stay."""
    script = [[TEXT, TOOL, TOOL], [{**TOOL, "id": "mine"}, TOOL]]
    first, second = parse_script(script, "a.json"), parse_script(json.loads(json.dumps(script)), "b.json")
    assert first == second
    ids = [[b.id for b in turn if isinstance(b, ToolUseBlock)] for turn in first]
    assert ids == [["toolu_s00000_01", "toolu_s00000_02"], ["mine", "toolu_s00001_01"]]


def test_parsed_blocks_keep_the_script_content() -> None:
    """Blocks keep the script's text, name and input (an omitted input is an empty object)."""
    (turn,) = parse_script([[TEXT, TOOL, {"type": "tool_use", "name": "list_dir"}]], "a.json")
    assert turn == (TextBlock(text="hello"),
                    ToolUseBlock(id="toolu_s00000_01", name="read_file", input={"path": "a.txt"}),
                    ToolUseBlock(id="toolu_s00000_02", name="list_dir", input={}))


async def test_turn_k_is_answered_by_entry_k(tmp_path: Path) -> None:
    """The request's turn (assistant messages so far) selects the entry, in any order, so resume continues."""
    model = ScriptedModel.from_file(write(tmp_path, [[{"type": "text", "text": "zero"}],
                                                     [{"type": "text", "text": "one"}],
                                                     [{"type": "text", "text": "two"}]]))
    for k in (2, 0, 1, 1):
        response = await model.complete(request(k))
        assert response.content == (TextBlock(text=["zero", "one", "two"][k]),)


async def test_past_the_end_answers_a_short_final_text() -> None:
    """After the last entry, every turn gets the fixed final text and ends the turn."""
    model = ScriptedModel(parse_script([[TOOL]], "a.json"))
    for k in (1, 5):
        response = await model.complete(request(k))
        assert response.content == (TextBlock(text=FINAL_TEXT),)
        assert response.stop_reason == "end_turn"
        assert response.tool_uses == []


async def test_empty_script_finishes_at_once() -> None:
    """A script with no turns answers the first turn with the final text."""
    response = await ScriptedModel(parse_script([], "a.json")).complete(request(0))
    assert response.content == (TextBlock(text=FINAL_TEXT),)


async def test_stop_reason_follows_the_content() -> None:
    """A turn with any tool_use stops for tool use; a text-only turn ends the turn."""
    model = ScriptedModel(parse_script([[TEXT, TOOL], [TEXT], [TOOL]], "a.json"))
    reasons = [(await model.complete(request(k))).stop_reason for k in range(3)]
    assert reasons == ["tool_use", "end_turn", "tool_use"]
    assert [b.name for b in (await model.complete(request(0))).tool_uses] == ["read_file"]


async def test_answers_are_repeatable() -> None:
    """Asking for the same turn twice gives equal responses (a resumed session sees the same proposal)."""
    model = ScriptedModel(parse_script([[TEXT, TOOL]], "a.json"))
    assert await model.complete(request(0)) == await model.complete(request(0))


def test_model_name_records_the_script_path(tmp_path: Path) -> None:
    """A model built from a file is named after it, as recorded in the session."""
    path = write(tmp_path, [[TEXT]])
    assert ScriptedModel.from_file(path).name == f"script:{path}"
    assert ScriptedModel([]).name == "script"


class _Listener:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.attempts: list[ModelAttempt] = []

    def on_text(self, delta: str) -> None:
        self.texts.append(delta)

    def on_attempt(self, attempt: ModelAttempt) -> None:
        self.attempts.append(attempt)


async def test_listener_sees_each_text_block_then_one_ok_attempt() -> None:
    """Text blocks reach the listener as deltas (tool calls do not), then one ok attempt; the answer is the same
    with or without a listener."""
    model = ScriptedModel(parse_script([[TEXT, TOOL, {"type": "text", "text": "bye"}]], "a.json"))
    listener = _Listener()
    response = await model.complete(request(0), listener)
    assert listener.texts == ["hello", "bye"]
    (attempt,) = listener.attempts
    assert (attempt.number, attempt.outcome, attempt.error_kind, attempt.usage) == (1, "ok", None, response.usage)
    assert response == await model.complete(request(0))


def test_a_script_object_scripts_the_children_it_delegates_to() -> None:
    """`{"turns": [...], "children": [...]}`: child N (0 first) reads its own turns, nested children by path; a child
    the script lacks has no turns (it answers with the final text at once); stray keys are refused."""
    turn = [{"type": "text", "text": "t"}]
    grandchild = [[{"type": "text", "text": "grandchild"}]]
    script = {"turns": [turn], "children": [[turn, turn], {"turns": [turn], "children": [grandchild]}]}
    assert len(parse_script(script, "s.json")) == 1
    assert len(parse_script(script, "s.json", (0,))) == 2
    assert len(parse_script(script, "s.json", (1,))) == 1
    (only,) = parse_script(script, "s.json", (1, 0))
    assert only[0].text == "grandchild"  # type: ignore[union-attr]
    assert parse_script(script, "s.json", (5,)) == []
    with pytest.raises(ScriptError, match="unexpected keys"):
        parse_script({"turns": [], "kids": []}, "s.json")
