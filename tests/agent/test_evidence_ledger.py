"""The evidence ledger in-process: one masked row per call (allowed, denied, parked, settled) and per model attempt,
sha256 correlation with the raw arguments and results, best-effort writes that never fail the session, and a
resumed session appending to the same file."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agent.evidence_ledger import EvidenceLedger, Ledgers, excerpt
from agent.phases.plan import propose
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from agent.testing import StrictScriptedModel
from core.chain import ChainHead
from core.clock import SystemClock
from core.errors import PersistError
from core.events import BatchProposed, CallResult, SessionStarted, StoredEvent, UserMessage
from core.hashing import canonical_json, idempotency_key, sha256_text
from core.ids import IdFactory
from core.masking import Masker
from core.model import ModelAttempt, ModelResponse
from core.model.scripted import parse_script
from core.policy import parse_rule
from memory import InMemoryEventStore, NewReceipt, SessionRecord, Write
from tool_executor import builtin_tools

SECRET = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7d"
KEY = b"k" * 32


def use(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "id": call_id, "input": args}


def say(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def model(*turns: list[dict[str, Any]]) -> StrictScriptedModel:
    return StrictScriptedModel(parse_script(list(turns), "test-script"), name="script:test")


def make_runtime(tmp_path: Path, store: InMemoryEventStore | None = None) -> Runtime:
    clock = SystemClock()
    return Runtime(store=store or InMemoryEventStore(), clock=clock, ids=IdFactory(clock), tools=builtin_tools(),
                   masker=Masker(KEY), ledgers=Ledgers(tmp_path / "home" / "ledger", clock))


async def start(rt: Runtime, workspace: Path, scripted: StrictScriptedModel, *allow: str,
                on_ask: str | None = None) -> LiveSession:
    return await start_session(rt, model=scripted, workspace=workspace, mode="headless",
                               rules=[parse_rule("allow", a) for a in allow], prompt="do the task", max_turns=10,
                               asking=Asking(on_ask=on_ask))  # type: ignore[arg-type]


def real(path: Path) -> str:
    return os.path.realpath(path)


def rows(rt: Runtime, session_id: str) -> list[dict[str, Any]]:
    assert rt.ledgers is not None
    path = rt.ledgers.path(session_id)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def calls(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["call_id"]: r for r in found if r["kind"] == "call"}


async def results(rt: Runtime, session_id: str) -> dict[str, CallResult]:
    return {e.event.call_id: e.event for e in await rt.store.read_events(session_id) if isinstance(e.event, CallResult)}


async def test_allowed_and_denied_calls_and_attempts_have_rows(tmp_path: Path, workspace: Path) -> None:
    """Each call gets one row with its decision, deciding check and outcome; each model attempt gets one."""
    (workspace / "notes.txt").write_text(f"token {SECRET}\n")
    rt = make_runtime(tmp_path)
    live = await start(rt, workspace, model(
        [use("read_file", "r1", path="notes.txt"), use("write_file", "w1", path="out.txt", content=SECRET)],
        [say("done")]))
    outcome = await live.run()
    await rt.close()

    assert outcome.status == "completed"
    found = rows(rt, live.id)
    assert [r["kind"] for r in found] == ["model_attempt", "call", "call", "model_attempt"]
    assert all(r["v"] == 1 and r["session_id"] == live.id and r["committed"] for r in found)
    by_call = calls(found)
    read, write = by_call["r1"], by_call["w1"]
    assert (read["tool"], read["decision"], read["outcome"], read["turn"]) == ("read_file", "allowed", "ok", 1)
    assert read["check"] and read["duration_ms"] is not None and read["receipt_id"] is None
    assert (write["decision"], write["outcome"], write["check"]) == ("denied", "denied", "policy")
    assert [a["turn"] for a in found if a["kind"] == "model_attempt"] == [1, 2]
    assert found[0]["outcome"] == "ok" and found[0]["attempt"] == 1
    for row in found:
        assert row["observed_at"] <= row["committed_at"]


async def test_rows_are_masked(tmp_path: Path, workspace: Path) -> None:
    """No raw secret reaches the ledger file: arguments, results and steps are masked before they are written."""
    (workspace / "notes.txt").write_text(f"token {SECRET}\n")
    rt = make_runtime(tmp_path)
    live = await start(rt, workspace, model(
        [use("read_file", "r1", path="notes.txt"), use("write_file", "w1", path="out.txt", content=SECRET)],
        [say("done")]), "write_file")
    await live.run()
    await rt.close()

    assert rt.ledgers is not None
    text = rt.ledgers.path(live.id).read_text()
    assert SECRET not in text
    token = Masker(KEY).token("github_token", SECRET)
    by_call = calls(rows(rt, live.id))
    assert token in by_call["r1"]["result"] and token in by_call["w1"]["args"]


async def test_sha256_correlates_with_raw_arguments_and_results(tmp_path: Path, workspace: Path) -> None:
    """args_sha256 is the sha256 of the canonical raw arguments, result_sha256 that of the result the model got
    (equal to the receipt's outcome digest for an effectful call)."""
    (workspace / "notes.txt").write_text(f"token {SECRET}\n")
    rt = make_runtime(tmp_path)
    args = {"path": "out.txt", "content": f"x {SECRET} ü"}
    live = await start(rt, workspace, model(
        [use("read_file", "r1", path="notes.txt"), use("write_file", "w1", **args)], [say("done")]), "write_file")
    await live.run()
    got = await results(rt, live.id)
    (receipt,) = await rt.store.list_receipts(live.id)
    await rt.close()

    by_call = calls(rows(rt, live.id))
    assert by_call["w1"]["args_sha256"] == sha256_text(canonical_json(args))
    assert by_call["r1"]["args_sha256"] == sha256_text(canonical_json({"path": "notes.txt"}))
    for call_id in ("r1", "w1"):
        assert by_call[call_id]["result_sha256"] == sha256_text(got[call_id].content)
    assert by_call["w1"]["receipt_id"] == receipt.id
    assert by_call["w1"]["result_sha256"] == receipt.outcome_sha256


async def test_parked_call_has_a_row(tmp_path: Path, workspace: Path) -> None:
    """A call parked for approval is recorded as parked, with no outcome and no result yet."""
    rt = make_runtime(tmp_path)
    live = await start(rt, workspace, model([use("write_file", "w1", path="out.txt", content="hi")], [say("done")]),
                       on_ask="park")
    outcome = await live.run()
    await rt.close()

    assert outcome.status == "awaiting_approval"
    row = calls(rows(rt, live.id))["w1"]
    assert (row["decision"], row["outcome"], row["result_sha256"], row["result"]) == ("parked", None, None, None)
    assert row["args_sha256"] == sha256_text(canonical_json({"path": "out.txt", "content": "hi"}))
    assert row["committed"] is True


async def test_resume_appends_to_the_same_file(tmp_path: Path, workspace: Path) -> None:
    """A resumed session (another runtime, as another process would be) appends to its ledger; earlier rows stay."""
    store = InMemoryEventStore()
    script = [[use("read_file", "r1", path="a.txt")], [say("first done")], [use("list_dir", "l1", path=".")],
              [say("second done")]]
    (workspace / "a.txt").write_text("alpha")
    rt = make_runtime(tmp_path, store)
    live = await start(rt, workspace, model(*script))
    await live.run()
    await live.release(None)
    await rt.close()
    before = rows(rt, live.id)

    rt2 = make_runtime(tmp_path, store)
    again = await resume_session(rt2, live.id, model=model(*script), rules=[])
    outcome = await again.run("go on")
    await again.release(None)
    await rt2.close()

    assert outcome.status == "completed"
    after = rows(rt2, live.id)
    assert after[: len(before)] == before
    assert list(calls(after)) == ["r1", "l1"]
    assert calls(after)["l1"]["turn"] == 3
    assert [r["turn"] for r in after if r["kind"] == "model_attempt"] == [1, 2, 3, 4]


async def test_call_settled_from_its_receipt_on_resume_has_a_row(tmp_path: Path, workspace: Path) -> None:
    """A call the process died in (receipt dispatched, no result) is settled on resume, not re-run: one row says so."""
    store = InMemoryEventStore()
    rt = make_runtime(tmp_path, store)
    sid = rt.ids.session_id()
    now, ws = rt.clock.now(), real(workspace)
    await store.create_session(
        SessionRecord(id=sid, created_at=now, updated_at=now, mode="headless", workspace=ws, model="script:test",
                      status="active", lease=None),
        Write(events=[(SessionStarted(session_id=sid, mode="headless", workspace=ws, model="script:test",
                                      rules=(parse_rule("allow", "write_file"),), max_turns=10,
                                      plan_digest=rt.plan("headless").digest), 0), (UserMessage(text="go"), 0)]))
    turn = [use("write_file", "w1", path="out.txt", content="hi")]
    (blocks,) = parse_script([turn], "test-script")
    batch = propose(ModelResponse(content=blocks, stop_reason="tool_use"), batch_id=rt.ids.uuid7()).proposal
    assert isinstance(batch, BatchProposed)
    (call,) = batch.calls
    receipt = NewReceipt(id=rt.ids.receipt_id(), call_id="w1", tool="write_file", args_sha256=call.input_sha256,
                         idempotency_key=idempotency_key(sid, "w1", call.input_sha256))
    await store.commit(sid, Write(events=[(batch, 1)], new_receipts=[receipt]))

    live = await resume_session(rt, sid, model=model(turn, [say("done")]), rules=[])
    await live.run()
    await rt.close()

    row = calls(rows(rt, sid))["w1"]
    assert (row["decision"], row["check"], row["outcome"], row["receipt_id"]) == ("allowed", "receipt", "unknown",
                                                                                  receipt.id)
    assert row["settled_on_resume"] is True and row["args_sha256"] == call.input_sha256
    assert not (workspace / "out.txt").exists()


async def test_failed_write_is_counted_and_logged_and_the_session_completes(tmp_path: Path, workspace: Path) -> None:
    """The ledger directory is a regular file: every row fails, the first failure is a warning, nothing else."""
    rt = make_runtime(tmp_path)
    assert rt.ledgers is not None
    rt.ledgers.directory.parent.mkdir(parents=True)
    rt.ledgers.directory.write_text("not a directory")
    (workspace / "a.txt").write_text("alpha")
    live = await start(rt, workspace, model([use("read_file", "r1", path="a.txt")], [say("done")]))
    with capture_logs() as logs:
        outcome = await live.run()
        ledger = rt.ledgers.get(live.id)
        await rt.close()

    assert outcome.status == "completed"
    assert ledger is not None and ledger.failures == 3 and ledger.rows_written == 0
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert warnings[0]["event"] == "cannot write the evidence ledger" and warnings[0]["session_id"] == live.id
    assert (await rt.store.get_session(live.id)).status == "completed"


async def test_rows_a_failed_commit_never_carried_are_marked(tmp_path: Path, workspace: Path) -> None:
    """The ledger is in no transaction with the state log: a model attempt observed before a commit that failed
    is still written at close, marked as not committed."""
    store = InMemoryEventStore(fail_on_commit=lambda _sid, w: any(isinstance(e, BatchProposed) for e, _ in w.events))
    rt = make_runtime(tmp_path, store)
    live = await start(rt, workspace, model([use("read_file", "r1", path="a.txt")], [say("done")]))
    with pytest.raises(PersistError):
        await live.run()
    await rt.close()

    (attempt,) = rows(rt, live.id)
    assert attempt["kind"] == "model_attempt" and attempt["committed"] is False and attempt["committed_at"] is None


async def test_a_torn_last_line_does_not_swallow_the_next_row(tmp_path: Path, workspace: Path) -> None:
    """A row cut short (a crash mid-write) stays one bad line: the next rows start on a fresh line."""
    rt = make_runtime(tmp_path)
    assert rt.ledgers is not None
    live = await start(rt, workspace, model([say("done")]))
    path = rt.ledgers.path(live.id)
    path.parent.mkdir(parents=True)
    path.write_text('{"v": 1, "kind": "call", "tur')
    await live.run()
    await rt.close()

    torn, *rest = path.read_text().splitlines()
    assert torn == '{"v": 1, "kind": "call", "tur'
    assert [json.loads(line)["kind"] for line in rest] == ["model_attempt"]


async def test_ledger_file_is_private(tmp_path: Path, workspace: Path) -> None:
    """The ledger file is created readable by its owner only."""
    rt = make_runtime(tmp_path)
    live = await start(rt, workspace, model([say("done")]))
    await live.run()
    await rt.close()
    assert rt.ledgers is not None
    assert os.stat(rt.ledgers.path(live.id)).st_mode & 0o777 == 0o600


def test_excerpt_masks_before_it_cuts() -> None:
    """A secret across the cut is masked whole (the token is kept entire); the excerpt says how long the text was."""
    masker = Masker(KEY)
    token = masker.token("github_token", SECRET)
    cut = excerpt(masker, "a" * 990 + " " + SECRET + " tail", 1000)
    assert cut == "a" * 990 + " " + token + f"... [{990 + 1 + len(SECRET) + 5} characters in all]"
    assert excerpt(masker, "short", 1000) == "short"


def test_long_text_is_masked_as_a_prefix() -> None:
    """Past the masking window only a stream prefix is masked: a secret at the window's edge is held back, not cut."""
    masker = Masker(KEY)
    text = "word " * 405 + SECRET + " and more" * 1000
    cut = excerpt(masker, text, 5000)
    assert SECRET[:20] not in cut and cut.startswith("word word")
    assert cut.endswith(f"... [{len(text)} characters in all]")


async def test_the_heads_file_records_where_each_write_left_the_logs(tmp_path: Path, workspace: Path) -> None:
    """Beside the rows, `ID.heads` gets the head of the newest commit at each write: seqs never go back, and the
    last one is where the session's logs end (what `--verify` compares with), also after a resume."""
    (workspace / "a.txt").write_text("alpha")
    rt = make_runtime(tmp_path)
    live = await start(rt, workspace, model([use("read_file", "r1", path="a.txt")], [say("done")],
                                           [say("again")]))
    await live.run()
    await live.release("completed")
    again = await resume_session(rt, live.id, rules=[], model=model([say("x")], [say("y")], [say("again")]),
                                 prompt="more")
    await again.run("more")
    await rt.close()
    assert rt.ledgers is not None
    lines = [json.loads(line) for line in rt.ledgers.heads_path(live.id).read_text().splitlines()]
    assert lines and all(h["kind"] == "head" and h["session_id"] == live.id for h in lines)
    seqs = [(h["events_seq"], h["timeline_seq"]) for h in lines]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    final = rt.store.chain_head(live.id)
    assert final is not None and rt.ledgers.last_head(live.id) == final
    assert final.events_seq == (await rt.store.read_events(live.id))[-1].seq
    assert oct(rt.ledgers.heads_path(live.id).stat().st_mode & 0o777) == "0o600"


async def test_a_torn_head_line_is_skipped_and_the_next_starts_fresh(tmp_path: Path, workspace: Path) -> None:
    """A head line cut short by a crash is never read as a head, and the next one is written on a line of its
    own."""
    rt = make_runtime(tmp_path)
    assert rt.ledgers is not None
    live = await start(rt, workspace, model([say("done")]))
    path = rt.ledgers.heads_path(live.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"v": 1, "kind": "head", "session_id": "' + live.id + '", "events_seq": 99')
    assert rt.ledgers.last_head(live.id) is None
    await live.run()
    await rt.close()
    torn, *rest = path.read_text().splitlines()
    assert torn.endswith('"events_seq": 99') and rest
    assert rt.ledgers.last_head(live.id) == rt.store.chain_head(live.id)


def test_the_observer_asks_for_the_head_once_per_commit_and_hands_on_every_event(tmp_path: Path) -> None:
    """A commit's events share its `at`: the head is asked for at its first event only; events of another commit
    (another `at`) are asked again, and the inner observer sees every event."""
    asked: list[int] = []
    seen: list[int] = []
    ledger = EvidenceLedger(tmp_path / "l.jsonl", "s1", Masker(KEY), SystemClock(), turn=lambda: 1,
                            head=lambda: asked.append(1) or None)  # type: ignore[func-returns-value]
    observe = ledger.observer(lambda item: seen.append(item.seq))
    first, second = datetime.now(UTC), datetime.now(UTC) + timedelta(milliseconds=1)
    for seq, at in ((1, first), (2, first), (3, first), (4, second), (5, second)):
        observe(StoredEvent(session_id="s1", seq=seq, at=at, turn=1, event=UserMessage(text="x")))
    assert len(asked) == 2 and seen == [1, 2, 3, 4, 5]


async def test_commits_handed_over_close_together_are_written_at_once_and_closing_writes_them(tmp_path: Path) -> None:
    """The writer lets commits gather once it is handed one (a turn's two commits come milliseconds apart): those
    handed over meanwhile go in the same write, with one head line, the newest; closing the ledger ends the wait
    and writes every row (with a wait far longer than the join at close, nothing would be written)."""
    seq = [0]
    ledger = EvidenceLedger(tmp_path / "l.jsonl", "s1", Masker(KEY), SystemClock(), turn=lambda: 1,
                            head=lambda: ChainHead(events_seq=seq[0], events_hash=f"{seq[0]:064x}",
                                                   timeline_seq=seq[0], timeline_hash=f"{seq[0]:064x}"),
                            gather_s=3600.0)
    for n in range(5):
        seq[0] = n + 1
        ledger.attempt(ModelAttempt(number=1, outcome="ok", duration_ms=1.0, message=f"attempt {n}"))
        ledger.committed(datetime.now(UTC))
        if n == 0:  # the writer has taken the first before the others come
            await anyio.to_thread.run_sync(_until_taken, ledger)
    await ledger.aclose()
    rows = [json.loads(line) for line in ledger.path.read_text().splitlines()]
    assert [r["message"] for r in rows] == [f"attempt {n}" for n in range(5)] and all(r["committed"] for r in rows)
    lines = [json.loads(line) for line in ledger.heads_path.read_text().splitlines()]
    assert [h["events_seq"] for h in lines] == [5]


def _until_taken(ledger: EvidenceLedger) -> None:
    while not ledger._queue.empty():
        time.sleep(0.001)
