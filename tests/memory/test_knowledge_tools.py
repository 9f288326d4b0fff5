"""The agent's knowledge tools: read-only specs whose PII class comes from the datasets' config, and handlers that
answer the service's typed JSON (a refusal is an error result, any other miss a plain answer)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import jsonschema

from core.knowledge import DatasetGrant
from core.tools import BoundToolPlan, ToolContext
from memory.knowledge import GET, SEARCH, KnowledgeIndex, KnowledgeService, knowledge_tools, load_corpus
from tests._knowledge_corpus import sha256_file, write_pydoc_topics


def _service(tmp_path: Path) -> KnowledgeService:
    write_pydoc_topics(tmp_path / "pydoc")
    grants = {"pydoc": DatasetGrant(name="pydoc", pii="internal", modes=("headless", "interactive"), source="cfg"),
              "hr": DatasetGrant(name="hr", pii="sensitive", modes=("interactive",), source="cfg")}
    corpus = load_corpus({"pydoc": (tmp_path / "pydoc",)})
    return KnowledgeService(grants=grants, index=KnowledgeIndex(tmp_path / "home", corpus), common_term_share=0.25)


def _ctx(tmp_path: Path, mode: str = "headless") -> ToolContext:
    return ToolContext(session_id="s", mode=mode, model="script:x", turn=1, call_id="c", workspace=tmp_path,  # type: ignore[arg-type]
                       idempotency_key="k", deadline_s=30)


def test_specs_are_read_only_with_the_pii_class_of_the_granted_datasets(tmp_path: Path) -> None:
    service = _service(tmp_path)
    headless = {t.name: t for t in knowledge_tools(service, "headless")}
    interactive = {t.name: t for t in knowledge_tools(service, "interactive")}
    assert set(headless) == {SEARCH, GET}
    for spec in headless.values():
        assert (spec.safety, spec.effect, spec.pii) == ("read", "read_only", "internal")
        jsonschema.Draft202012Validator.check_schema(dict(spec.input_schema))
    assert {t.pii for t in interactive.values()} == {"sensitive"}
    assert BoundToolPlan(headless.values(), "headless").digest != BoundToolPlan(interactive.values(),
                                                                               "interactive").digest


def test_handlers_answer_typed_json(tmp_path: Path) -> None:
    """A hit carries the digests; a weak match is a plain answer; a denied dataset is an error result."""
    service = _service(tmp_path)
    tools = {t.name: t for t in knowledge_tools(service, "headless")}
    ctx = _ctx(tmp_path)

    async def main() -> None:
        found = await tools[GET].handler({"id": "doc:assert.txt"}, ctx)
        hit = json.loads(found.text)["hits"][0]
        assert not found.is_error and hit["source_sha256"] == sha256_file(tmp_path / "pydoc" / "assert.txt")
        weak = await tools[SEARCH].handler({"query": "the of and"}, ctx)
        assert not weak.is_error and json.loads(weak.text)["kind"] == "weak_match"
        denied = await tools[SEARCH].handler({"query": "nonlocal", "dataset": "hr"}, ctx)
        assert denied.is_error and json.loads(denied.text)["kind"] == "dataset_denied"
        hits = await tools[SEARCH].handler({"query": "nonlocal", "limit": 2}, ctx)
        assert next(h["id"] for h in json.loads(hits.text)["hits"]) == "nonlocal.txt"

    anyio.run(main)
