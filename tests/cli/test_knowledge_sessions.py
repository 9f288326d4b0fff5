"""Knowledge in sessions, through real `strata` processes over a real home: a session whose mode may read a
declared dataset has the two knowledge tools in its plan, records its manifest in `session_started` (covered by
the plan digest), and its calls take the whole pipeline (policy, timeline rows, no receipt: they are read_only).
A document edited between runs is recorded on resume and the model is told, never swapped in silence."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from core.events import StoredEvent
from core.messages import TextBlock
from core.state import fold
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import events_of, json_lines, result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

RESTART = ("---\nid: restart-db\ntags: [database, ops]\n---\n# Restarting the database\n\n"
           "1. Drain connections with `pgbouncer pause`.\n2. Restart postgresql.\n")
ROTATE = "# Rotating the TLS certificate\n\nRenew with certbot, then reload nginx.\n"


@pytest.fixture
def sops(tmp_path: Path) -> Path:
    root = tmp_path / "sops"
    root.mkdir()
    (root / "restart-db.md").write_text(RESTART, encoding="utf-8")
    (root / "rotate-tls.md").write_text(ROTATE, encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def declare(cli: StrataCLI, sops: Path, modes: str = '["headless"]', *, private: Path | None = None) -> None:
    """`sops` for `modes`; `private` (when given) for the daemon only."""
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    text = f'[knowledge.datasets.sops]\npath = "{sops}"\npii = "none"\nmodes = {modes}\n'
    if private is not None:
        text += f'[knowledge.datasets.private]\npath = "{private}"\nmodes = ["daemon"]\n'
    config.write_text(text, encoding="utf-8")


def manifest_digest(cli: StrataCLI) -> str:
    """The manifest `strata knowledge list` builds: a session's, when every declared dataset is the session's."""
    (manifest,) = [o for o in cli.json_lines("knowledge", "list", "--json") if o["type"] == "manifest"]
    return str(manifest["digest"])


def stored_events(cli: StrataCLI, session_id: str) -> list[StoredEvent]:
    """The session's state log as `strata export` gives it, typed again (to fold it as resume does)."""
    out = []
    for obj in json_lines_in_process(cli, "export", session_id):
        if obj.pop("type") != "event":
            continue
        envelope = {k: obj.pop(k) for k in ("seq", "at", "turn")}
        out.append(StoredEvent.model_validate({"session_id": session_id, **envelope, "event": obj}))
    return out


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def test_a_session_whose_mode_reads_a_dataset_has_the_tools_and_records_its_manifest(
        cli: StrataCLI, sops: Path, workspace: Path, tmp_path: Path) -> None:
    """Search and get run through the pipeline like built-ins (allowed by the read default, a timeline row each,
    no receipt); the hit is bound to the file's bytes; a dataset the mode may not read is refused, not searched."""
    private = tmp_path / "private"
    private.mkdir()
    (private / "certificate.md").write_text("The certificate key lives in the vault.\n", encoding="utf-8")
    declare(cli, sops)
    only_sops = manifest_digest(cli)
    declare(cli, sops, private=private)
    script = write_script(tmp_path / "s.json", [
        [tool_use("k1", "knowledge_search", query="pgbouncer restart")],
        [tool_use("k2", "knowledge_get", id="doc:restart-db"),
         tool_use("k3", "knowledge_search", query="certificate", dataset="private")],
        [text("Followed sops/restart-db.")]])
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "restart")
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)
    (started,) = kinds(events, "session_started")
    assert started["knowledge_digest"] == only_sops  # the daemon's dataset is not in a headless session's manifest
    results = {e["call_id"]: e for e in kinds(events, "call_result")}
    search = json.loads(results["k1"]["content"])
    assert (search["result"], search["hits"][0]["id"], search["hits"][0]["method"]) == ("hits", "restart-db", "lexical")
    (hit,) = json.loads(results["k2"]["content"])["hits"]
    assert hit["source_sha256"] == hashlib.sha256((sops / "restart-db.md").read_bytes()).hexdigest()
    assert hit["content_sha256"] == hashlib.sha256(hit["text"].encode("utf-8")).hexdigest()
    denied = json.loads(results["k3"]["content"])
    assert results["k3"]["is_error"] and (denied["result"], denied["kind"]) == ("miss", "dataset_denied")
    session_id = result_line(proc.stdout)["session_id"]  # type: ignore[index]
    rows = [r for r in json_lines_in_process(cli, "timeline", session_id, "--json") if r["kind"] == "call"]
    assert [(r["tool"], r["decision"]) for r in rows] == [
        ("knowledge_search", "allowed"), ("knowledge_get", "allowed"), ("knowledge_search", "allowed")]
    assert all(r["data"]["plan_digest"] == started["plan_digest"] for r in rows)
    assert json_lines_in_process(cli, "receipts", session_id, "--json") == []


def test_a_session_whose_mode_reads_no_dataset_has_no_knowledge_tools(
        cli: StrataCLI, sops: Path, workspace: Path, tmp_path: Path) -> None:
    """Declared for other modes only: no manifest is recorded and a call to the tool is refused as no tool of its plan
    (the plan digest is the one a session without any knowledge config has)."""
    script = write_script(tmp_path / "s.json", [[tool_use("k1", "knowledge_search", query="pgbouncer")],
                                                [text("none")]])
    bare = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "x")
    declare(cli, sops, modes='["interactive"]')
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "x")
    assert proc.returncode == 0, proc.stderr
    (started,) = kinds(events_of(proc.stdout), "session_started")
    assert "knowledge_digest" not in started
    assert started["plan_digest"] == kinds(events_of(bare.stdout), "session_started")[0]["plan_digest"]
    (result,) = kinds(events_of(proc.stdout), "call_result")
    assert (result["status"], result["check"]) == ("denied", "resolve")  # not a tool of its plan


def test_a_document_edited_between_sessions_is_recorded_on_resume_and_the_model_is_told(
        cli: StrataCLI, sops: Path, workspace: Path, tmp_path: Path) -> None:
    """`strata run`, edit one procedure, `strata resume`: the resume records the new manifest (and a new plan
    digest), a `knowledge_changed` event names the edited document, and its notice is in the user message the
    model's next turn answers; the document served then is the edited one."""
    declare(cli, sops)
    script = write_script(tmp_path / "s.json", [
        [tool_use("k1", "knowledge_get", id="restart-db")],
        [text("Done: followed sops/restart-db.")],
        [tool_use("k2", "knowledge_get", id="restart-db")],
        [text("Done again.")]])
    first = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "restart")
    assert first.returncode == 0, first.stderr
    session_id = result_line(first.stdout)["session_id"]  # type: ignore[index]
    (started,) = kinds(events_of(first.stdout), "session_started")
    before = started["knowledge_digest"]

    with (sops / "restart-db.md").open("a", encoding="utf-8") as f:
        f.write("3. Check replication lag.\n")
    after = manifest_digest(cli)
    assert after != before

    second = strata(cli, "resume", session_id, "Restart it again", "--json")
    assert second.returncode == 0, second.stderr
    events = events_of(second.stdout)
    (resumed,) = kinds(events, "session_resumed")
    assert resumed["knowledge_digest"] == after and resumed["plan_digest"] != started["plan_digest"]
    (changed,) = kinds(events, "knowledge_changed")
    assert (changed["previous_digest"], changed["digest"]) == (before, after)
    assert (changed["changed"], changed["added"], changed["removed"]) == (["sops/restart-db"], [], [])
    assert "Documents edited: sops/restart-db." in changed["notice"]
    (result,) = [e for e in kinds(events, "call_result") if e["call_id"] == "k2"]
    assert json.loads(result["content"])["hits"][0]["text"].endswith("3. Check replication lag.\n")

    # The model's next turn is asked with the conversation folded from the log: the notice is in it, before the
    # person's new prompt, in the user message that turn answers.
    log = stored_events(cli, session_id)
    told_at = next(e.seq for e in log if e.event.kind == "knowledge_changed")
    proposed_at = next(e.seq for e in log if e.event.kind == "batch_proposed" and e.seq > told_at)
    conversation = fold([e for e in log if e.seq < proposed_at]).messages
    assert conversation[-1].role == "user"
    assert [b.text for b in conversation[-1].content if isinstance(b, TextBlock)] == [
        changed["notice"], "Restart it again"]
    rows = [r for r in json_lines_in_process(cli, "timeline", session_id, "--json") if r["kind"] == "lifecycle"]
    assert any(r["outcome"] == "knowledge_changed" for r in rows)
    assert any(r["outcome"] == "resumed" and "the knowledge corpus changed" in r["summary"] for r in rows)


def test_a_resume_over_the_same_corpus_records_the_same_manifest_and_tells_nothing(
        cli: StrataCLI, sops: Path, workspace: Path, tmp_path: Path) -> None:
    declare(cli, sops)
    script = write_script(tmp_path / "s.json", [[text("one")], [text("two")]])
    first = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    session_id = result_line(first.stdout)["session_id"]  # type: ignore[index]
    (started,) = kinds(events_of(first.stdout), "session_started")
    second = strata(cli, "resume", session_id, "again", "--json")
    assert second.returncode == 0, second.stderr
    events = events_of(second.stdout)
    (resumed,) = kinds(events, "session_resumed")
    assert (resumed["knowledge_digest"], resumed["plan_digest"]) == (started["knowledge_digest"],
                                                                     started["plan_digest"])
    assert kinds(events, "knowledge_changed") == []
    assert json_lines(second.stdout)[-1]["status"] == "completed"
