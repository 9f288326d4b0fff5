"""The agent's knowledge tools, `knowledge_search` and `knowledge_get`: specs and handlers over a
KnowledgeService. Safety `read`, effect `read_only`; their PII class is the highest of the datasets the session's
mode may read (config `[knowledge.datasets.NAME] pii`).

Not registered here: the session's tool plan adds them (with the service built from the session's manifest) when
knowledge is wired into the session lifecycle. A handler answers one JSON object, the service's typed answer
(`{"result": "hits", ...}` or `{"result": "miss", "kind": ...}`); a refusal (`no_manifest`, `unknown_dataset`,
`dataset_denied`) is an error result, any other miss is a plain answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.errors import StrataError
from core.events import Mode
from core.knowledge import DEFAULT_LIMIT, MAX_LIMIT, Hits, Miss, pii_of
from core.tools import Stop, ToolContext, ToolError, ToolOutput, ToolSpec, run_stoppable
from memory.knowledge._service import KnowledgeService

SEARCH = "knowledge_search"
GET = "knowledge_get"
TIMEOUT_S = 30.0

_DATASET = {"type": "string", "minLength": 1, "maxLength": 64, "description": "a dataset name (default: all granted)"}


def knowledge_tools(service: KnowledgeService, mode: Mode) -> list[ToolSpec]:
    """The two tools for a session in `mode` over `service`."""
    granted = sorted(name for name, g in service.grants.items() if mode in g.modes)
    names = ", ".join(granted) or "none"
    pii = pii_of(service.grants, mode)

    async def search(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        def work(stop: Stop) -> Hits | Miss:
            return service.search(args["query"], mode=ctx.mode, dataset=args.get("dataset"),
                                  limit=args.get("limit", DEFAULT_LIMIT))
        return _output(await _answer(work))

    async def get(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        def work(stop: Stop) -> Hits | Miss:
            return service.get(args["id"], mode=ctx.mode, dataset=args.get("dataset"))
        return _output(await _answer(work))

    return [
        ToolSpec(SEARCH, "Search the local knowledge index (operating procedures) for documents holding the query's "
                         f"discriminating words. Datasets: {names}. Each hit carries the dataset, id, the matched "
                         "section's exact text and byte range, tags, content and source sha256: cite the id and "
                         "content_sha256. A miss (weak_match, not_found, ...) means there is nothing to cite.",
                 _schema({"query": {"type": "string", "minLength": 1, "maxLength": 1000},
                          "dataset": _DATASET,
                          "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}}, ["query"]),
                 search, safety="read", effect="read_only", pii=pii, primary_arg="query", timeout_s=TIMEOUT_S),
        ToolSpec(GET, "Get one knowledge document by its exact id (`doc:<id>` or `<id>`), whole, with its content "
                      f"and source sha256. Datasets: {names}.",
                 _schema({"id": {"type": "string", "minLength": 1, "maxLength": 520}, "dataset": _DATASET}, ["id"]),
                 get, safety="read", effect="read_only", pii=pii, primary_arg="id", timeout_s=TIMEOUT_S),
    ]


async def _answer(work: Callable[[Stop], Hits | Miss]) -> Hits | Miss:
    """The service's answer; an index it cannot read (damaged, or gone and not buildable: a StoreError with its
    hint) is the call's clean error, not a handler crash."""
    try:
        return await run_stoppable(work)
    except StrataError as exc:
        raise ToolError(f"{exc.message}; {exc.hint}" if exc.hint else exc.message) from None


def _output(answer: Hits | Miss) -> ToolOutput:
    return ToolOutput(answer.model_dump_json(), is_error=isinstance(answer, Miss) and answer.refusal)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
