"""examples/knowledge: a scripted agent finds a procedure, reads it whole and cites it by id and content sha256,
in a real trusted project through real `strata` processes. The citation is checked against the file's bytes, so
an edit of the example's procedure that is not carried into its script fails here."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from tests._in_process_cli import set_up_in_process
from tests.cli._helpers import call_results, events_of, strata
from tests.conftest import StrataCLI

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "knowledge"


def test_the_example_agent_cites_the_procedure_by_id_and_the_hash_of_its_bytes(cli: StrataCLI,
                                                                               tmp_path: Path) -> None:
    ws = tmp_path / "project"
    shutil.copytree(EXAMPLE, ws)
    assert set_up_in_process(cli, "trust", str(ws)).returncode == 0
    proc = strata(cli, "run", "--model", f"script:{ws / 'script.json'}", "--workspace", str(ws), "--json",
                  "How do I restart the database?")
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)
    calls = {c["call_id"]: c for ev in events if ev["kind"] == "batch_proposed" for c in ev["calls"]}
    results = call_results(events)
    (search_id,) = [c for c, call in calls.items() if call["tool"] == "knowledge_search"]
    (get_id,) = [c for c, call in calls.items() if call["tool"] == "knowledge_get"]
    first = json.loads(results[search_id]["content"])["hits"][0]
    assert (first["dataset"], first["id"], first["method"]) == ("sops", "restart-db", "lexical")
    (hit,) = json.loads(results[get_id]["content"])["hits"]
    raw = (ws / ".strata" / "knowledge" / "sops" / "restart-db.md").read_bytes()
    start, end = hit["byte_range"]
    assert hashlib.sha256(raw[start:end]).hexdigest() == hit["content_sha256"]
    assert hashlib.sha256(raw).hexdigest() == hit["source_sha256"]
    (answer,) = [e for e in events if e["kind"] == "assistant_message"]
    cited = answer["content"][0]["text"]
    assert f"procedure {hit['id']} ({hit['dataset']}, content sha256 {hit['content_sha256']})" in cited
