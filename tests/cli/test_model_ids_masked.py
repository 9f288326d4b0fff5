"""Model-chosen tool-use ids that hold a secret (a scripted or non-Anthropic endpoint may send anything as an id).

Two layers, both through the real `strata` command (runs in a process of their own; what reads them back, in the
test's process: tests/_in_process_cli.py):
- the plan phase renames an id that masking recognises as a secret (or that is outside the API's alphabet, too
  long, or already used), so the raw id is never stored: no surface, and not the database either, ever sees it;
- every observation surface masks ids anyway: a session whose stored log and rows do hold a secret id (written
  directly to the store, as an older Strata would have) shows it masked in `timeline --json`, the JSONL export,
  `receipts` and the evidence ledger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from agent.evidence_ledger import Ledgers
from config.ledger_files import LEDGER_DIR
from core.clock import SystemClock
from core.events import BatchCompleted, BatchProposed, CallResult, PlannedCall, SessionStarted, UserMessage
from core.hashing import idempotency_key, sha256_json
from core.masking import Masker
from core.messages import ToolUseBlock
from core.timeline import TimelineEntry
from memory import NewReceipt, SessionRecord, SqliteEventStore, Write
from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import result_line, strata, strata_read, text, tool_use
from tests.conftest import StrataCLI, write_script
from tool_executor import CallEnv, CallRecord

SHORT_SECRET = "sk-ant-api03-" + "Qm7vX2pL9sT4wZ8kR3nB6yHc"  # 37 characters of the API's id alphabet
LONG_SECRET = "sk-ant-api03-" + "Fk2_Jd8-Lw4Np6Qr1Ts3Vx5Zb7Hc9Mg0" * 3


def surfaces(cli: StrataCLI, session_id: str) -> dict[str, str]:
    """Everything a person or a tool can read about a session, by name."""
    out: dict[str, str] = {}
    for name, args in {
        "sessions": ("sessions",), "sessions --json": ("sessions", "--json"),
        "timeline": ("timeline", session_id), "timeline --json": ("timeline", session_id, "--json"),
        "receipts": ("receipts",), "receipts --json": ("receipts", "--json"),
        "receipts ID --json": ("receipts", session_id, "--json"),
        **{f"export {fmt}": ("export", session_id, "--format", fmt, "--output", "-")
           for fmt in ("jsonl", "html", "otlp")},
    }.items():
        proc = strata_read(cli, *args)  # in this process (tests/_in_process_cli.py)
        assert proc.returncode == 0, (name, proc.stderr)
        out[name] = proc.stdout + proc.stderr
    for folder in (LEDGER_DIR, "logs"):
        for path in sorted((cli.home / folder).glob("*")):
            out[f"{folder}/{path.name}"] = path.read_text(encoding="utf-8", errors="replace")
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)  # two runs and some twenty `strata` processes
def test_secret_ids_from_the_model_never_reach_a_surface_or_the_database(cli: StrataCLI, workspace: Path,
                                                                         tmp_path: Path) -> None:
    """A run whose model uses secret-shaped ids (one in the API's alphabet, one too long) for a write and a read:
    the calls run under fresh ids, and no output, listing, export, ledger, log or database file holds either
    secret; the conversation (`show`) holds the new ids."""
    (workspace / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "ids.json", [
        [tool_use(SHORT_SECRET, "write_file", path="out.txt", content="x"),
         tool_use(LONG_SECRET, "read_file", path="a.txt")],
        [text("done")],
    ])
    shown = {}
    for head in (("run", "--json"), ("--verbose", "run")):
        proc = strata(cli, *head, "--workspace", str(workspace), "--model", f"script:{script}",
                      "--allow", "write_file", "go")
        assert proc.returncode == 0, proc.stderr
        shown[" ".join(head)] = proc.stdout + proc.stderr
    result = result_line(shown["run --json"])
    assert result is not None
    session_id = result["session_id"]
    shown.update(surfaces(cli, session_id))  # listings, receipts, ledgers and logs cover both sessions
    for sid in {s["id"] for s in json_lines_in_process(cli, "sessions", "--json")}:
        for args in (("show", sid, "--json"), ("timeline", sid, "--json")):
            proc = strata_read(cli, *args)
            shown[" ".join(args)] = proc.stdout + proc.stderr
    assert (workspace / "out.txt").read_text() == "x"
    leaks = [name for name, out in shown.items() if "Qm7vX2pL9sT4" in out or "Fk2_Jd8-Lw4N" in out]
    assert leaks == [], f"a secret id reached: {leaks}"
    for path in cli.home.glob("strata.db*"):
        data = path.read_bytes()
        assert b"Qm7vX2pL9sT4" not in data and b"Fk2_Jd8-Lw4N" not in data, path
    ids = [b["id"] for m in show_in_process(cli, session_id)["messages"] for b in m["content"]
           if b["type"] == "tool_use"]
    assert len(ids) == 2 and not any(i.startswith("sk-") for i in ids), ids


def _store_a_session_with_a_secret_id(home: Path, workspace: Path) -> str:
    """A session as an older Strata stored it: the secret id raw in the log, the receipt and the timeline."""

    async def main() -> str:
        store = await SqliteEventStore.open(home / "strata.db")
        try:
            clock = SystemClock()
            now = clock.now()
            sid = "01900000-0000-7000-8000-00000000abcd"
            args = {"path": "out.txt", "content": "x"}
            sha = sha256_json(args)
            record = SessionRecord(id=sid, created_at=now, updated_at=now, mode="headless", workspace=str(workspace),
                                   model="script:old", title="go", status="completed")
            await store.create_session(record, Write(events=[
                (SessionStarted(session_id=sid, mode="headless", workspace=str(workspace), model="script:old",
                                max_turns=10, plan_digest="0" * 16), 0),
                (UserMessage(text="go"), 0)]))
            call = PlannedCall(call_id=SHORT_SECRET, tool="write_file", input=args, input_sha256=sha)
            result = CallResult(batch_id="b1", call_id=SHORT_SECRET, tool="write_file", status="ok", content="wrote",
                                is_error=False, receipt_id="rcpt_1")
            await store.commit(sid, Write(
                events=[(BatchProposed(batch_id="b1", content=(ToolUseBlock(id=SHORT_SECRET, name="write_file",
                                                                              input=args),), calls=(call,)), 1),
                        (result, 1), (BatchCompleted(batch_id="b1"), 1)],
                new_receipts=[NewReceipt(id="rcpt_1", call_id=SHORT_SECRET, tool="write_file",
                                         idempotency_key=idempotency_key(sid, SHORT_SECRET, sha), args_sha256=sha)],
                timeline=[TimelineEntry(kind="call", turn=1, call_id=SHORT_SECRET, tool="write_file",
                                        decision="allowed", check="policy", outcome="ok", summary="write_file")]))
            return sid
        finally:
            await store.close()

    return anyio.run(main)


def test_every_surface_masks_a_stored_secret_id(cli: StrataCLI, workspace: Path) -> None:
    """Defence in depth: ids that are stored raw are masked on the way out, by `timeline --json`, `receipts`
    (table and JSON, call id and idempotency key), and every export format."""
    session_id = _store_a_session_with_a_secret_id(cli.home, workspace)
    with sqlite3.connect(cli.home / "strata.db") as db:  # the premise: the secret is in the stored rows
        assert db.execute("SELECT count(*) FROM timeline WHERE call_id = ?", (SHORT_SECRET,)).fetchone() == (1,)
    shown = surfaces(cli, session_id)
    leaks = [name for name, out in shown.items() if "Qm7vX2pL9sT4" in out]
    assert leaks == [], f"a stored secret id reached: {leaks}"
    assert "[MASKED:anthropic_key:" in shown["timeline --json"] and "[MASKED:anthropic_key:" in shown["receipts"]


def test_the_evidence_ledger_masks_call_ids(tmp_path: Path) -> None:
    """The ledger (a file other tools read) writes a call's id masked, like every other string it holds: here the
    row of a call settled from its receipt on resume, as an older session with a secret id would get."""

    async def main() -> str:
        ledgers = Ledgers(tmp_path / LEDGER_DIR, SystemClock())
        ledger = ledgers.open("s1", Masker.throwaway({}), turn=lambda: 1)
        args = {"path": "out.txt", "content": "x"}
        call = PlannedCall(call_id=SHORT_SECRET, tool="write_file", input=args, input_sha256=sha256_json(args))
        env = CallEnv(session_id="s1", mode="headless", model="m", turn=1, plan_digest="p")
        result = CallResult(batch_id="b1", call_id=SHORT_SECRET, tool="write_file", status="unknown",
                            content="outcome unknown", is_error=True, receipt_id="rcpt_1")
        ledger.call(CallRecord(env=env, call=call, batch_id="b1", result=result, settled_on_resume=True))
        await ledgers.aclose()
        return ledgers.path("s1").read_text(encoding="utf-8")

    written = anyio.run(main)
    assert "Qm7vX2pL9sT4" not in written and "[MASKED:anthropic_key:" in written, written
