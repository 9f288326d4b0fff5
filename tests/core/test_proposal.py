"""The plan phase's review of an answer (core/proposal.py), and the two helpers it stands on: text as valid UTF-8
(core/utf8.py) and JSON read with a nesting bound (core/bounded_json.py). Pure functions, tested directly; the
same behaviour through the real process is in tests/cli/test_model_output_wedges.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.bounded_json import MAX_JSON_DEPTH, TooDeep, depth_exceeds, loads
from core.events import BatchProposed, storable_json
from core.hashing import sha256_json
from core.messages import ContentBlock, TextBlock, ToolResultBlock, ToolUseBlock
from core.proposal import (
    INVALID_TOOL_NAME,
    MAX_CALLS_PER_BATCH,
    MAX_ID_CHARS,
    MAX_INPUT_BYTES,
    MAX_INPUT_DEPTH,
    MAX_TEXT_CHARS,
    REMOVED_KEY,
    SAFE_ID,
    Review,
    review,
)
from core.utf8 import TextStream, unpaired_surrogates, valid_text


def use(call_id: str, name: str = "read_file", **args: Any) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name=name, input=args or {"path": "a.txt"})


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def run(*blocks: ContentBlock, used: set[str] | None = None, secret: str | None = None) -> Review:
    return review(blocks, used_ids=used or set(), id_seed="batch-1",
                  looks_secret=None if secret is None else (lambda s: secret in s))


def assert_committable(r: Review) -> None:
    """What the review promises: the batch stores and reads back, ids are safe and unique, and the content's
    tool_use blocks are exactly the planned calls."""
    uses = [b for b in r.content if isinstance(b, ToolUseBlock)]
    assert [(u.id, u.name, u.input) for u in uses] == [(c.call_id, c.tool, c.input) for c in r.calls]
    ids = [c.call_id for c in r.calls]
    assert len(ids) == len(set(ids)) and all(SAFE_ID.fullmatch(i) and len(i) <= MAX_ID_CHARS for i in ids)
    assert all(c.input_sha256 == sha256_json(c.input) for c in r.calls)
    if r.calls:
        storable_json(BatchProposed(batch_id="b", content=r.content, calls=r.calls))


# -- a well-formed answer passes unchanged ---------------------------------------------------------------------


def test_a_well_formed_answer_is_kept_as_it_is() -> None:
    """Valid text, safe fresh ids and small inputs: the same blocks (the same objects), no note, no refusal."""
    blocks = (TextBlock(text="Reading."), use("toolu_a"), use("toolu_b", "list_dir", path="."))
    r = run(*blocks, used={"toolu_old"})
    assert r.content == blocks and all(x is y for x, y in zip(r.content, blocks, strict=True))
    assert r.notes == () and all(c.refused == () for c in r.calls)
    assert [c.call_id for c in r.calls] == ["toolu_a", "toolu_b"]


# -- ids ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bad_id", "why"), [
    ("call 1/2", "alphabet"), ("", "alphabet"), ("toolu_\ud800", "alphabet"), ("ü", "alphabet"),
    ("x" * (MAX_ID_CHARS + 1), "longer than"), ("toolu_old", "already used"),
])
def test_an_unsafe_or_used_id_is_renamed_in_content_and_call(bad_id: str, why: str) -> None:
    """The id is replaced by a fresh safe one in the tool_use block and the planned call alike; the note names
    the reason and a sha256 prefix of the original, never the original."""
    r = run(use(bad_id), used={"toolu_old"})
    (call,) = r.calls
    assert call.call_id != bad_id and call.call_id.startswith("toolu_")
    (note,) = [n for n in r.notes if "renamed" in n]
    assert why in note and call.call_id in note
    if bad_id:
        assert bad_id not in " ".join(r.notes)
    assert_committable(r)


def test_an_id_repeated_within_one_answer_keeps_the_first() -> None:
    """Two blocks with one id: the first keeps it, the second gets a fresh one; both calls are planned."""
    r = run(use("dup"), use("dup", "list_dir", path="."), use("dup"))
    assert r.calls[0].call_id == "dup"
    assert len({c.call_id for c in r.calls}) == 3
    assert_committable(r)


def test_a_secret_looking_id_is_renamed() -> None:
    """An id masking would hide (here: anything holding "sk-ant-") is renamed even though it is in the alphabet."""
    secret_id = "sk-ant-api03-abcdefghijklmnopqrstuvwx"
    r = run(use(secret_id), secret="sk-ant-")
    assert r.calls[0].call_id != secret_id and "secret" in r.notes[0] and secret_id not in r.notes[0]


def test_fresh_ids_are_deterministic_and_avoid_every_taken_id() -> None:
    """The same answer in the same batch gets the same fresh ids (a replay is stable), and a fresh id the model
    itself happened to use (or the session used) is not given twice."""
    first = run(use("bad id"), use("bad id"))
    assert first.calls == run(use("bad id"), use("bad id")).calls
    fresh = first.calls[0].call_id
    again = run(use(fresh), use("bad id"))
    assert again.calls[0].call_id == fresh and again.calls[1].call_id != fresh
    taken = run(use("bad id"), used={fresh})
    assert taken.calls[0].call_id != fresh


# -- limits ---------------------------------------------------------------------------------------------------


def test_an_input_nested_past_the_limit_is_refused_with_a_placeholder() -> None:
    """Depth MAX_INPUT_DEPTH is kept; one more level is refused: the input becomes a placeholder object in both
    places, and the refusal names the limit."""
    ok = run(use("a", path="x", deep=nested(MAX_INPUT_DEPTH - 1)))
    assert ok.calls[0].refused == ()
    r = run(use("a", path="x", deep=nested(MAX_INPUT_DEPTH)), use("b"))
    deep, fine = r.calls
    assert deep.refused and f"nested more than {MAX_INPUT_DEPTH} levels" in deep.refused[0]
    assert list(deep.input) == [REMOVED_KEY] and fine.refused == ()
    assert_committable(r)


def test_any_depth_is_judged_without_recursion() -> None:
    """An input nested far deeper than Python's recursion limit (built in-process) is refused, not a crash."""
    r = run(use("a", deep=nested(50_000)))
    assert r.calls[0].refused
    assert_committable(r)


def test_an_input_over_the_byte_limit_is_refused() -> None:
    """The size is the canonical JSON in UTF-8 bytes: multi-byte characters count as what they weigh."""
    under = run(use("a", content="x" * (MAX_INPUT_BYTES - 100)))
    assert under.calls[0].refused == ()
    over = run(use("a", content="é" * (MAX_INPUT_BYTES // 2)))
    assert over.calls[0].refused and "bytes" in over.calls[0].refused[0]
    assert_committable(over)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), [1, {"x": float("nan")}]])
def test_nan_and_infinity_are_refused(value: Any) -> None:
    """JSON has no NaN or infinity: stored, they would read back as null, so the call would run on other
    arguments than its digest; sent back, the API would refuse the request."""
    r = run(use("a", n=value))
    assert r.calls[0].refused and "NaN" in r.calls[0].refused[0]
    assert_committable(r)


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, object()])
def test_values_json_cannot_carry_are_refused(value: Any) -> None:
    """Only JSON's types can be committed (an in-process model could hand over anything)."""
    r = run(use("a", v=value))
    assert r.calls[0].refused and "JSON cannot carry" in r.calls[0].refused[0]
    assert_committable(r)


def test_calls_past_the_per_answer_limit_are_refused_but_kept() -> None:
    """Every call stays in the conversation; those after the first MAX_CALLS_PER_BATCH are refused, saying so."""
    r = run(*(use(f"c{i}") for i in range(MAX_CALLS_PER_BATCH + 2)))
    assert len(r.calls) == MAX_CALLS_PER_BATCH + 2
    assert all(c.refused == () for c in r.calls[:MAX_CALLS_PER_BATCH])
    assert all("only the first" in c.refused[0] for c in r.calls[MAX_CALLS_PER_BATCH:])


@pytest.mark.parametrize("name", ["", "read file", "x" * 65, "tool\ud800", "ünïcode"])
def test_a_name_that_cannot_be_a_tool_name_is_refused_and_replaced(name: str) -> None:
    """A tool name outside the API's pattern is replaced (so later requests stay valid) and the call refused."""
    r = run(use("a", name))
    assert (r.calls[0].tool, r.content[0].name) == (INVALID_TOOL_NAME, INVALID_TOOL_NAME)  # type: ignore[union-attr]
    assert r.calls[0].refused
    assert_committable(r)


def test_a_long_text_block_is_cut_with_a_note() -> None:
    """A text block over MAX_TEXT_CHARS keeps its start and says how much was cut."""
    r = run(TextBlock(text="y" * (MAX_TEXT_CHARS + 10)))
    (block,) = r.content
    assert isinstance(block, TextBlock) and block.text.startswith("y" * MAX_TEXT_CHARS) and "10 more" in block.text
    assert "cut a text block" in r.notes[0]


def test_tool_results_in_an_answer_are_dropped() -> None:
    """An assistant message cannot hold a tool_result; one in an answer is dropped, with a note."""
    r = run(TextBlock(text="hi"), ToolResultBlock(tool_use_id="x", content="forged"), use("a"))
    assert [type(b) for b in r.content] == [TextBlock, ToolUseBlock] and "dropped 1" in r.notes[-1]


# -- text -------------------------------------------------------------------------------------------------------


def test_surrogates_everywhere_are_replaced_and_counted() -> None:
    """Unpaired surrogates in text, input keys and values become U+FFFD; the note counts them all; the input's
    digest is of the repaired input."""
    r = run(TextBlock(text="a\ud800b"), use("a", **{"k\udc00": ["v\udbff", {"w": "\ud83d\ude00"}]}))
    text, call_block = r.content
    assert isinstance(text, TextBlock) and text.text == "a\ufffdb"
    assert isinstance(call_block, ToolUseBlock) and call_block.input == r.calls[0].input
    assert r.calls[0].input == {"k\ufffd": ["v\ufffd", {"w": "\U0001f600"}]}
    assert "replaced 3 unpaired surrogate(s)" in r.notes[-1]
    assert_committable(r)


def test_valid_text_is_returned_untouched_and_pairs_are_joined() -> None:
    text = "plain ü 😀"
    assert valid_text(text) is text and unpaired_surrogates(text) == 0
    assert valid_text("\ud83d\ude00") == "😀" and unpaired_surrogates("\ud83d\ude00") == 0
    assert valid_text("\ude00\ud83d") == "\ufffd\ufffd" and unpaired_surrogates("x\ud800\ufffd") == 1


def test_a_stream_joins_a_pair_split_across_pieces() -> None:
    """A high surrogate at the end of a piece waits for the next; one never followed is replaced at the end."""
    stream = TextStream()
    assert [stream.feed("ab\ud83d"), stream.feed("\ude00c"), stream.feed("d\ud800"), stream.flush()] == [
        "ab", "😀c", "d", "\ufffd"]


# -- bounded JSON -----------------------------------------------------------------------------------------------


def test_bounded_json_refuses_deep_documents_before_parsing() -> None:
    """Nesting past the bound is TooDeep (a ValueError), whether arrays or objects; brackets in strings do not
    count; a document at the bound parses."""
    with pytest.raises(TooDeep):
        loads("[" * 5000 + "]" * 5000)
    with pytest.raises(ValueError):
        loads('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1))
    tricky = {"s": "[" * 5000 + '"\\' + "{" * 900}  # brackets, a quote and a backslash, all inside one string
    assert loads(json.dumps(tricky)) == tricky
    assert loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is not None
    assert not depth_exceeds('["\\"[[[["]', 2) and depth_exceeds("[[[]]]", 2)


# -- the session's ids ------------------------------------------------------------------------------------------


def test_id_digests_never_forget_an_id_and_survive_a_snapshot() -> None:
    """Every id added is found again, after the state's JSON round trip too; ids never added are (with 32-bit
    digests, a false "used" is possible but only costs a rename) not found here."""
    from core.id_digests import IdDigests
    from core.snapshot import SNAPSHOT_VERSION, dump_state, load_state
    from core.state import SessionState

    state = SessionState(session_id="s", started=True, last_seq=7)
    ids = [f"toolu_{i:06d}" for i in range(5000)] + ["call 1/2", "\ud800", ""]
    state.call_ids.update(ids)
    loaded = load_state(dump_state(state), SNAPSHOT_VERSION, 7).call_ids
    assert loaded == state.call_ids and len(loaded) == len(ids)
    assert all(i in loaded for i in ids)
    assert "toolu_999999" not in loaded and 42 not in loaded
    assert IdDigests.decode(IdDigests().encode()) == IdDigests()
