"""The fold's and the plan phase's models built without validating values already exactly of their fields' types
(core/messages.py `message_of`, `tool_result_of`; core/events.py `batch_completed`, `planned_call`,
`batch_proposed`) are the models validation builds: the same `__dict__` (values, their types, the blocks and calls
themselves, which validation keeps), the same fields set, no extra, no private values, the same JSON; and any value
not exactly of its type is validated as always: converted, or refused with the same errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.events import (
    BatchCompleted,
    BatchProposed,
    PlannedCall,
    TokenUsage,
    batch_completed,
    batch_proposed,
    planned_call,
    storable_json,
)
from core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock, message_of, tool_result_of


class _Text(str):
    pass


def _built(make: Any) -> tuple[str, Any]:
    try:
        model = make()
    except ValidationError as exc:
        return "refused", [(e["loc"], e["type"]) for e in exc.errors()]
    values = [(k, v, type(v), [type(x) for x in v] if type(v) is tuple else None) for k, v in model.__dict__.items()]
    return "built", (type(model), values, model.model_fields_set, model.__pydantic_extra__,
                     model.__pydantic_private__, model.model_dump_json())


def _both(fast: Any, slow: Any) -> None:
    assert _built(fast) == _built(slow)


USE = ToolUseBlock(id="toolu_1", name="read_file", input={"path": "a.txt"})
TEXT = TextBlock(text="reading")
RESULT = ToolResultBlock(tool_use_id="toolu_1", content="fine")
CALL = PlannedCall(call_id="toolu_1", tool="read_file", input={"path": "a.txt"}, input_sha256="h")


def test_a_message_keeps_its_blocks_and_odd_values_are_validated_as_always() -> None:
    for role in ("assistant", "user", _Text("user"), "system", None, 1):
        for content in ((USE,), (TEXT, USE), (RESULT,), (), [USE], (USE, {"type": "text", "text": "x"}),
                        ({"type": "tool_result", "tool_use_id": "t", "content": "c"},), (USE, None), "x"):
            _both(lambda r=role, c=content: message_of(r, c), lambda r=role, c=content: Message(role=r, content=c))
    blocks = (TEXT, USE)
    built = message_of("assistant", blocks)
    assert built.content[0] is TEXT and built.content[1] is USE


def test_a_tool_result_and_odd_values_are_validated_as_always() -> None:
    for call_id in ("toolu_1", _Text("t"), 1, None):
        for content in ("fine", "", _Text("x"), b"x", None, 3):
            for is_error in (False, True, 0, 1, "false", None):
                _both(lambda a=call_id, c=content, e=is_error: tool_result_of(a, c, e),
                      lambda a=call_id, c=content, e=is_error: ToolResultBlock(tool_use_id=a, content=c, is_error=e))


def test_a_batch_completed_and_odd_ids_are_validated_as_always() -> None:
    for batch_id in ("b", "", _Text("b"), 1, None, b"b"):
        _both(lambda b=batch_id: batch_completed(b), lambda b=batch_id: BatchCompleted(batch_id=b))


def test_a_planned_call_copies_its_input_as_validation_does_and_odd_values_are_validated() -> None:
    nested = [1, {"x": None}]
    args = {"path": "a.txt", "more": nested}
    _both(lambda: planned_call("toolu_1", "read_file", args, "h", ()),
          lambda: PlannedCall(call_id="toolu_1", tool="read_file", input=args, input_sha256="h", refused=()))
    fast = planned_call("toolu_1", "read_file", args, "h", ())
    assert fast.input is not args and fast.input["more"] is nested  # a new dict, its values kept, as validation does
    odd: dict[str, list[Any]] = {"call_id": [_Text("c"), 1, None], "tool": [_Text("t"), None],
                                 "args": [{1: "x"}, {_Text("k"): 1}, [("a", 1)], None],
                                 "input_sha256": [_Text("h"), None, 5],
                                 "refused": [("why",), ["why"], (_Text("why"),), (1,), None]}
    valid: dict[str, Any] = {"call_id": "toolu_1", "tool": "read_file", "args": {"path": "a"}, "input_sha256": "h",
                             "refused": ()}
    for name, values in odd.items():
        for value in values:
            v = {**valid, name: value}
            _both(lambda v=v: planned_call(v["call_id"], v["tool"], v["args"], v["input_sha256"], v["refused"]),
                  lambda v=v: PlannedCall(call_id=v["call_id"], tool=v["tool"], input=v["args"],
                                          input_sha256=v["input_sha256"], refused=v["refused"]))


def test_a_batch_proposed_keeps_its_blocks_and_calls_and_odd_values_are_validated() -> None:
    usage = TokenUsage(input_tokens=3)
    valid: dict[str, Any] = {"batch_id": "b", "content": (TEXT, USE), "calls": (CALL,), "usage": None}
    odd: dict[str, list[Any]] = {"batch_id": [_Text("b"), 1], "content": [[USE], (USE, None), ()],
                                 "calls": [[CALL], (), ({"call_id": "c", "tool": "t", "input": {}},), (None,)],
                                 "usage": [usage, {"input_tokens": 1}, 0]}
    for name, values in [("batch_id", ["b"]), *odd.items()]:
        for value in values:
            v = {**valid, name: value}
            _both(lambda v=v: batch_proposed(v["batch_id"], v["content"], v["calls"], v["usage"]),
                  lambda v=v: BatchProposed(batch_id=v["batch_id"], content=v["content"], calls=v["calls"],
                                            usage=v["usage"]))
    built = batch_proposed("b", (TEXT, USE), (CALL,), usage)
    assert built.calls[0] is CALL and built.content[1] is USE and built.usage is usage


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4, unique=True),
       value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                      max_size=3), max_leaves=8),
       batch=st.text(max_size=12))
def test_a_proposal_of_generated_calls_stores_the_same_json(ids: list[str], value: Any, batch: str) -> None:
    uses = tuple(ToolUseBlock(id=i, name="tool", input={"v": value}) for i in ids)
    fast_calls = tuple(planned_call(i, "tool", {"v": value}, "h" + i, ()) for i in ids)
    slow_calls = tuple(PlannedCall(call_id=i, tool="tool", input={"v": value}, input_sha256="h" + i, refused=())
                       for i in ids)
    fast = batch_proposed(batch, uses, fast_calls, None)
    slow = BatchProposed(batch_id=batch, content=uses, calls=slow_calls, usage=None)
    assert fast == slow
    assert storable_json(fast) == storable_json(slow)
    assert _built(lambda: fast) == _built(lambda: slow)
