"""A property of the plan phase: no answer a model can give wedges a session.

Hypothesis generates whole answers (any text, unpaired surrogates included; any ids, with duplicates, ids of
earlier turns, secret-shaped ids and ids outside the API's alphabet; any tool names; any JSON inputs, with NaN,
nesting past the limit and inputs over the byte limit; up to more calls than one answer may hold) and drives the
real loop with them against a real SQLite store. Afterwards the session must: open again from the database
(`fold`), show (the CLI's own view, encoded as the CLI prints it), verify its timeline, and resume with a new
prompt; every request the model was sent must be one the Messages API accepts (the loopback server's own
validator), which means every tool_use has exactly one tool_result and no id repeats; no secret-shaped id is
stored. For a sample of the sessions the real `strata show` and `strata resume` processes are run too."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cli.views import show_view
from agent.session import Runtime, resume_session, start_session
from core.clock import SystemClock
from core.ids import IdFactory
from core.masking import Masker
from core.messages import ContentBlock, TextBlock, ToolUseBlock
from core.model import ModelListener, ModelRequest, ModelResponse
from core.model._anthropic_wire import request_params
from core.proposal import MAX_CALLS_PER_BATCH, MAX_INPUT_BYTES, MAX_INPUT_DEPTH
from core.state import fold
from memory import SqliteEventStore
from observability.session_timeline import verify_session
from tests._in_process_cli import show_in_process
from tests.cli._helpers import assert_clean_stderr, check_pairing
from tests.conftest import StrataCLI
from tests.wire.messages_validation import validate_request
from tool_executor import builtin_tools

SECRET_ID = "sk-ant-api03-Hq4Zt7Wc2Vn9Lb6Xs1Pf8Rd3"
CLI_SAMPLE_EVERY = 15
"""Every 15th generated session is also shown and resumed by the real `strata` process."""

# -- strategies ----------------------------------------------------------------------------------------------------

any_text = st.text(st.characters(exclude_categories=()), max_size=30)  # surrogates included
ids = st.one_of(st.sampled_from(["toolu_a", "toolu_b", "dup", "", "call 1/2", "toolu_\ud800", SECRET_ID,
                                 "x" * 80]), any_text)
names = st.sampled_from(["read_file", "list_dir", "glob", "write_file", "bash", "no_such_tool", "", "read file",
                         "read_file\udfff"])


BIG = "<a string over the byte limit>"
"""Stands for a string of MAX_INPUT_BYTES + 1 characters, made only when the block is built (a failing example
then stays printable)."""


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12)
inputs = st.one_of(
    st.dictionaries(any_text, json_values, max_size=4),
    st.fixed_dictionaries({"path": st.sampled_from(["a.txt", ".", "..", "/etc/passwd", "a\ud800.txt"]),
                           "pattern": st.sampled_from(["*", "**/*.txt"])}),
    st.integers(MAX_INPUT_DEPTH - 2, MAX_INPUT_DEPTH + 300).map(lambda n: {"deep": nested(n)}),
    st.just({"content": BIG}),
)
tool_use = st.builds(lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}, ids, names, inputs)
text_block = st.builds(lambda t: {"type": "text", "text": t}, any_text)
answers = st.lists(st.one_of(
    st.lists(st.one_of(text_block, tool_use), max_size=6),
    st.builds(lambda use: [use] * (MAX_CALLS_PER_BATCH + 1), tool_use),  # one id, over the per-answer limit
), min_size=1, max_size=4)


def block(raw: dict[str, Any]) -> ContentBlock:
    if raw["type"] == "text":
        return TextBlock(text=raw["text"])
    args = raw["input"]
    if args.get("content") == BIG:
        args = {**args, "content": "x" * (MAX_INPUT_BYTES + 1)}
    return ToolUseBlock.model_construct(id=raw["id"], name=raw["name"], input=args)


# -- the model and the checks ----------------------------------------------------------------------------------


class AnswerModel:
    """Answers turn k with the k-th generated answer (built without validation, as an adapter would hand it
    over), then with a short final text; keeps every request it was sent."""

    def __init__(self, turns: Sequence[Sequence[dict[str, Any]]], name: str) -> None:
        self._turns = [tuple(block(b) for b in turn) for turn in turns]
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self._name

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        self.requests.append(dataclasses.replace(request, messages=tuple(request.messages)))
        k = request.turn
        content = self._turns[k] if k < len(self._turns) else (TextBlock(text="done"),)
        uses = any(isinstance(b, ToolUseBlock) for b in content)
        return ModelResponse(content=content, stop_reason="tool_use" if uses else "end_turn")


def assert_requests_valid(model: AnswerModel) -> None:
    for request in model.requests:
        validate_request(request_params("claude-test", 1024, request))


async def drive(home: Path, workspace: Path, turns: list[list[dict[str, Any]]]) -> str:
    final = home / "final.json"
    final.write_text("[]", encoding="utf-8")
    name = f"script:{final}"
    store = await SqliteEventStore.open(home / "strata.db", durability="normal")  # a real file, fewer fsyncs
    rt = Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=builtin_tools(),
                 masker=Masker.throwaway({}))
    try:
        model = AnswerModel(turns, name)
        live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=[],
                                   prompt="go", max_turns=12)
        outcome = await live.run()
        await live.release(None)
        assert outcome.status != "failed", outcome
        assert_requests_valid(model)
    finally:
        await rt.close()
    return live.id


async def reopen_show_resume(home: Path, session_id: str) -> None:
    store = await SqliteEventStore.open(home / "strata.db", durability="normal")
    masker = Masker.throwaway({})
    rt = Runtime(store=store, clock=SystemClock(), ids=IdFactory(), tools=builtin_tools(), masker=masker)
    try:
        state = fold(await store.read_events(session_id))
        rec = await store.get_session(session_id)
        view = show_view(rec, rec.status, state, masker)
        json.dumps(view, ensure_ascii=False).encode("utf-8")  # what `strata show --json` prints
        check_pairing(view["messages"])
        used = [b["id"] for m in view["messages"] for b in m["content"] if b["type"] == "tool_use"]
        assert len(used) == len(set(used)) == len(state.call_ids) and all(i in state.call_ids for i in used), used
        assert not any("Hq4Zt7Wc" in i for i in used)
        assert (await verify_session(store, session_id)).ok
        again = AnswerModel([], rec.model)
        live = await resume_session(rt, session_id, model=again, rules=[], prompt="and now?")
        outcome = await live.run("and now?")
        await live.release(None)
        assert outcome.status == "completed", outcome
        assert_requests_valid(again)
    finally:
        await rt.close()


PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.timeout(900)  # 30 sessions, each run, reopened and resumed: minutes on a loaded machine
@PROPERTY
@given(answers)
def test_no_answer_wedges_a_session(turns: list[list[dict[str, Any]]]) -> None:
    """Whatever the answers, the session opens, shows, verifies and resumes, with every request valid; a sample
    is shown and resumed by the real `strata` process as well."""
    test_no_answer_wedges_a_session.runs = getattr(test_no_answer_wedges_a_session, "runs", 0) + 1  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        workspace.mkdir()
        (workspace / "a.txt").write_text("alpha\n")
        session_id = anyio.run(drive, home, workspace, turns)
        anyio.run(reopen_show_resume, home, session_id)
        if test_no_answer_wedges_a_session.runs % CLI_SAMPLE_EVERY == 1:  # type: ignore[attr-defined]
            cli = StrataCLI(home, Path(tmp))
            for args in (("show", session_id), ("resume", session_id, "--json", "once more"),
                         ("timeline", session_id, "--verify")):
                proc = cli.run(*args)
                assert_clean_stderr(proc)
                assert proc.returncode == 0, (args, proc.stderr)
            check_pairing(show_in_process(cli, session_id)["messages"])
